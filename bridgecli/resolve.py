"""Turning what a user typed (a gid, a gid prefix or a label) into a recipient gid.

Labels resolve through the local registry and the union roster; an ambiguous label is an
error listing every candidate with its host, an unknown one is an error. A gid that is not
in the roster is refused unless ``force`` (its inbox may still exist, e.g. a stopped agent).
"""

from __future__ import annotations

from typing import Any

from bridgecli.envelope import is_uuid
from bridgecli.errors import Ambiguous, ConfigError, NotFound
from bridgecli.gids import short
from bridgecli.hoststate.entities import Registry


def resolve_target(target: str, *, registry: Registry, roster: Any = None, force: bool = False) -> str:
    target = (target or "").strip()
    if not target:
        raise ConfigError("no target given", "pass a gid or a label (see `bridge roster`)")
    lowered = target.lower()
    if is_uuid(lowered):
        if force or registry.get(lowered) is not None:
            return lowered
        if roster is None or roster.get(lowered) is not None:
            return lowered
        raise NotFound(
            f"gid {lowered} is not in the roster (no gateway announces it)",
            "check `bridge roster`; pass --force to send to its inbox anyway",
        )
    candidates: dict[str, str] = {}
    for entity in registry.all():
        if entity.label == target or (len(target) >= 8 and entity.gid.startswith(lowered)):
            candidates[entity.gid] = entity.host
    if roster is not None:
        for entry in roster.entries():
            if entry.label == target or (len(target) >= 8 and entry.gid.startswith(lowered)):
                candidates.setdefault(entry.gid, entry.host)
    if len(candidates) == 1:
        return next(iter(candidates))
    if len(candidates) > 1:
        listing = ", ".join(f"{short(gid)} on {host}" for gid, host in sorted(candidates.items(), key=lambda kv: kv[1]))
        raise Ambiguous(
            f"label {target!r} matches {len(candidates)} entities: {listing}",
            "use the gid (or a longer gid prefix) instead of the label",
        )
    where = "the roster or on this host" if roster is not None else "this host (no roster without a gateway)"
    raise NotFound(f"no entity {target!r} in {where}", "check `bridge roster` / `bridge entities`")
