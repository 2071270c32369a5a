"""The rows of a roster view (:mod:`bridgecli.roster`): an entity as its gateway last
announced it, a live gateway, why a frame is refused, and the helpers that name and vet a frame's arrival (its routing
key, whether the broker dead-lettered it) or make an entry from a spawn answer. Pure.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from bridgecli.amqp.topology import ROSTER as EXCHANGE
from bridgecli.roster_frames import capped_interval
from bridgecli.roster_frames import text as _text

#: why frames were refused, as :meth:`RosterView.refused_frames` counts them
KEY_MISMATCH = "key_mismatch"  # body names another host or gid than its key, or not via bridge.roster
DEAD_LETTERED = "dead_lettered"  # dead-lettered into bridge.roster: the key was never checked
USER_MISMATCH = "user_mismatch"  # published by a broker user that may not speak for the key's host
FOREIGN_GID = "foreign_gid"  # the gid belongs to another host
UNSAFE_NAME = "unsafe_name"  # a host id or gid with control characters, or too long
TOO_LARGE = "too_large"  # over MAX_FRAME_BYTES, or a host frame with too many entities
FLOODED = "flooded"  # past its sender's budget (roster_relayed.FloodBudget), refused before decoding
REASONS = (KEY_MISMATCH, DEAD_LETTERED, USER_MISMATCH, FOREIGN_GID, UNSAFE_NAME, TOO_LARGE, FLOODED)

#: headers the broker adds to a dead-lettered message (0-9-1 and AMQP 1.0 style)
_DEATH_HEADERS = ("x-death", "x-first-death-exchange", "x-last-death-exchange")


@dataclass
class RosterEntry:
    """One entity as its gateway last announced it."""

    gid: str
    label: str
    role: str
    host: str
    status: str
    backend: str
    since: float
    version: str
    last_seen: float
    interval: float
    #: the channels the entity is in (sorted, de-duplicated; names only)
    channels: tuple[str, ...] = ()

    def announced(self) -> tuple[Any, ...]:
        """What its gateway announced (all but when it was heard): equal means only a refresh."""
        return (self.label, self.role, self.host, self.status, self.backend, self.since, self.version, self.channels)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["channels"] = list(self.channels)
        return data


@dataclass
class GatewayEntry:
    host: str
    version: str
    last_seen: float
    interval: float
    entities: int
    #: names of the spawn profiles in that host's own bridge.toml (names only: a profile's
    #: command never leaves its host) — what ``bridge spawn PROFILE --host H`` can start there
    profiles: tuple[str, ...] = ()
    #: when that host's gateway started (its clock), for uptime; None from older gateways
    started: float | None = None


def routing_key(host: str, gid: str) -> str:
    return f"roster.{host}.{gid}"


def arrival_key(method: Any) -> str:
    """The routing key a delivered frame carries for :meth:`RosterView.apply` — ``""`` (which
    matches no frame) unless it came through ``bridge.roster``: a frame pushed straight into a
    ``roster.<host>`` queue by name never passed the broker's topic permission check."""
    return str(method.routing_key) if getattr(method, "exchange", None) == EXCHANGE else ""


def dead_lettered(props: Any) -> bool:
    """Did the broker dead-letter this delivery into ``bridge.roster``? Then its routing key
    is whatever the dead-lettering queue's owner chose: the broker checks no topic permission
    on dead-lettering. Genuine frames are never dead-lettered."""
    headers = getattr(props, "headers", None)
    return isinstance(headers, dict) and any(name in headers for name in _DEATH_HEADERS)


def spawned_entry(handle: dict[str, Any], *, interval: float, now: float | None = None) -> RosterEntry:
    """A roster entry from a spawn answer (gid, host, label, role, deliver); its text comes
    from another host, so it is sanitised like a frame's."""
    now = time.time() if now is None else now
    return RosterEntry(
        gid=str(handle["gid"]),
        label=_text(handle.get("label"), "?"),
        role=_text(handle.get("role"), "agent"),
        host=str(handle["host"]),
        status="unknown",
        backend=_text(str(handle.get("deliver") or "?").split(":", 1)[0], "?"),
        since=now,
        version="?",
        last_seen=now,
        interval=capped_interval(interval),
    )
