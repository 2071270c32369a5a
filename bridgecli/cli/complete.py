"""Dynamic shell completion: what a TAB offers for targets, message ids, hosts, profiles and
browser groups (attached to click parameters as ``shell_complete=``).

A TAB runs on every keystroke, so: **no broker, ever** (sources are the gateway's socket with a
short timeout, read-only local files and :mod:`bridgecli.cache`); **never fail** (an error
yields fewer candidates, never a traceback); **untrusted text stays inert** (values a shell
would split are dropped, descriptions lose control characters before zsh or fish print them).
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False  # typing and click cost more than a TAB may: names for checkers only
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, TypeGuard

    import click

#: seconds a TAB may wait for the local gateway before falling back to the cache
SOCKET_TIMEOUT = 0.3
#: most message ids offered (the newest first)
MAX_MESSAGES = 50
#: ``bridge install``'s clients and their titles: bridgecli.clients would cost a TAB its imports
#: (json, dataclasses); tests/cli/test_complete.py checks the two agree
CLIENTS = {
    "claude-code": "Claude Code",
    "codex": "Codex",
    "opencode": "OpenCode",
    "gemini": "Gemini CLI",
    "cursor": "Cursor",
}
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.@:/+=-]{1,200}$")
_HEX = re.compile(r"^[0-9a-fA-F-]+$")


class CompletionItem:
    """One candidate, with the attributes click's shell formatters read (``value``, ``type``,
    ``help``); defined here so a TAB answered without click needs no click import."""

    __slots__ = ("value", "type", "help")

    def __init__(self, value: str, type: str = "plain", help: str | None = None) -> None:
        self.value = value
        self.type = type
        self.help = help


# --- sources ---------------------------------------------------------------------------


def roster() -> dict[str, Any]:
    """The union roster: from the local gateway if it answers within SOCKET_TIMEOUT, else
    the copy it last wrote to the cache (``{}`` when neither exists)."""
    from bridgecli import paths

    try:
        socket_path = paths.gateway_socket_text()
        if not os.path.exists(socket_path):  # no gateway: skip the socket module's import cost
            raise FileNotFoundError(socket_path)
        from bridgecli.gateway.client import GatewayClient

        client = GatewayClient.connect(socket_path, timeout=SOCKET_TIMEOUT)
        if client is not None:
            with client:
                return client.call("roster", timeout=SOCKET_TIMEOUT)
    except Exception:  # a hung or half-started gateway: the cache is good enough for a TAB
        pass
    from bridgecli import cache

    return cache.read(cache.ROSTER)


def query(db: str, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows from the SQLite file at absolute path ``db`` opened read-only (never created,
    never locked for writing); ``[]`` when the file is missing or busy."""
    if not os.path.exists(db):
        return []
    # through the C module _sqlite3: the sqlite3 package adds datetime and its adapters, a third
    # of a TAB's query
    from bridgecli.private_apis import sqlite_readonly

    return sqlite_readonly.rows(db, sql, params, SOCKET_TIMEOUT)


def local_entities() -> list[dict[str, str]]:
    """Entities registered on this host (``bridge entities``), from the registry file."""
    from bridgecli import paths

    rows = query(os.path.join(paths.dir_text("data"), "entities.db"), "SELECT gid, label, host, role FROM entities")
    return [{"gid": g, "label": label, "host": h, "role": r, "status": "local"} for g, label, h, r in rows]


# --- helpers ---------------------------------------------------------------------------


def _safe(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and bool(_SAFE_VALUE.match(value))


def _inert(text: Any, limit: int = 60) -> str:
    """One printable line: descriptions are shown by zsh/fish and may come from anyone."""
    flat = "".join(c if c.isprintable() else " " for c in str(text))
    flat = " ".join(flat.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _entity_items(entities: Iterable[dict[str, Any]], incomplete: str) -> list[CompletionItem]:
    """Labels (a unique label is the nicest thing to type) and, for ambiguous labels or a
    typed hex prefix, gids."""
    by_gid: dict[str, dict[str, Any]] = {}
    for entry in entities:
        if _safe(entry.get("gid")) and _safe(entry.get("label")):
            by_gid.setdefault(entry["gid"], entry)
    by_label: dict[str, list[dict[str, Any]]] = {}
    for entry in by_gid.values():
        by_label.setdefault(entry["label"], []).append(entry)
    items: dict[str, CompletionItem] = {}
    for label, group in by_label.items():
        if not label.startswith(incomplete):
            continue
        if len(group) == 1:
            e = group[0]
            items[label] = CompletionItem(
                label, help=_inert(f"{e.get('role', '?')} on {e.get('host', '?')}, {e.get('status', '?')}")
            )
        else:  # sending to this label would fail as ambiguous: offer each gid instead
            for e in group:
                items[e["gid"]] = CompletionItem(e["gid"], help=_inert(f"{label} on {e.get('host', '?')}"))
    if incomplete and _HEX.match(incomplete):
        for gid, e in by_gid.items():
            if gid.startswith(incomplete.lower()):
                items.setdefault(gid, CompletionItem(gid, help=_inert(f"{e['label']} on {e.get('host', '?')}")))
    return [items[key] for key in sorted(items)]


# --- shell_complete callbacks ------------------------------------------------------------


def targets(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """TARGET of send/ask/stop: labels and gids of the whole roster plus local entities."""
    try:
        entries = [e for e in roster().get("entries", []) if isinstance(e, dict)]
        return _entity_items(entries + local_entities(), incomplete)
    except Exception:
        return []


def local_targets(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Entities of this host only (--from, --as, unregister): no socket, just the registry."""
    try:
        return _entity_items(local_entities(), incomplete)
    except Exception:
        return []


def hosts(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Host ids with a live gateway (or entities) in the roster."""
    try:
        view = roster()
        found: dict[str, str] = {}
        for g in view.get("gateways", []):
            if isinstance(g, dict) and _safe(g.get("host")):
                found[g["host"]] = f"gateway {g.get('version', '?')}, {g.get('entities', 0)} entities"
        for e in view.get("entries", []):
            if isinstance(e, dict) and _safe(e.get("host")):
                found.setdefault(e["host"], "no live gateway heard")
        return [CompletionItem(h, help=_inert(found[h])) for h in sorted(found) if h.startswith(incomplete)]
    except Exception:
        return []


def profiles(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Spawn profiles: the target gateway runs its *own* profiles, so with ``--host H`` typed
    first these are the names H's gateway announces on the roster (this host's bridge.toml
    when H is this host); without it, every profile of this host and of each live gateway,
    each described with the hosts that define it."""
    try:
        from bridgecli import config

        cfg = config.load()
        local: dict[str, Any] = cfg.profiles()
        here = cfg.host_id
    except Exception:  # a broken bridge.toml is reported when the command runs, not on TAB
        local, here = {}, None
    wanted = (ctx.params or {}).get("host")
    where: dict[str, list[str]] = {}
    if wanted in (None, here):
        for name in local:
            where.setdefault(name, []).append(f"{here} (here)" if here else "here")
    if wanted is None or wanted != here:
        for g in _gateways():
            if g["host"] == here or (wanted is not None and g["host"] != wanted):
                continue
            for name in g.get("profiles") or ():
                if isinstance(name, str):
                    where.setdefault(name, []).append(g["host"])
    items = []
    for name in sorted(where):
        if not (_safe(name) and name.startswith(incomplete)):
            continue
        spec = local.get(name) if isinstance(local.get(name), dict) else None
        detail = (
            f"{spec.get('launcher', '?')}: {spec.get('command', '')}" if spec and wanted in (None, here) else "profile"
        )
        items.append(CompletionItem(name, help=_inert(f"{detail} — on {', '.join(where[name])}")))
    return items


def _gateways() -> list[dict[str, Any]]:
    """Live gateways of the roster (never raises)."""
    try:
        return [g for g in roster().get("gateways", []) if isinstance(g, dict) and _safe(g.get("host"))]
    except Exception:
        return []


def _messages(incomplete: str, kinds: tuple[str, ...] | None) -> list[CompletionItem]:
    from bridgecli import paths, wirejson

    prefix = incomplete.lower()  # ids are stored lower-case
    # the newest ids are chosen first and only their bodies read: sorting every row with its
    # body took a 2000-message store longer than the rest of the TAB's query
    order = "ORDER BY state = 'held' DESC, received DESC"
    chosen = "SELECT msg_id FROM messages WHERE substr(msg_id, 1, ?) = ?"
    params: list[Any] = [len(prefix), prefix]
    if kinds:
        chosen += f" AND kind IN ({','.join('?' * len(kinds))})"
        params += list(kinds)
    sql = f"SELECT msg_id, kind, state, body FROM messages WHERE msg_id IN ({chosen} {order} LIMIT ?) {order}"
    params.append(MAX_MESSAGES)
    items = []
    for msg_id, kind, state, body in query(os.path.join(paths.dir_text("state"), "gateway.db"), sql, params):
        if not _safe(msg_id):
            continue
        try:
            wire = wirejson.loads(body)
            who = wire.get("fromLabel") or str(wire.get("from", "?"))[:13]
            content = wire.get("content", "")
        except (ValueError, AttributeError):
            who, content = "?", ""
        items.append(CompletionItem(msg_id, help=_inert(f"{kind} from {who} ({state}): {content}")))
    return items


def message_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """MSGID of reply/show: messages received on this host (held ones first), read-only."""
    try:
        return _messages(incomplete, None)
    except Exception:
        return []


def ask_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """MSGID of answer: only ASKs can be answered."""
    try:
        return _messages(incomplete, ("ASK",))
    except Exception:
        return []


def browser_groups(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Tab groups last seen by `bridge browser tabs/targets/open` (the browser cache)."""
    from bridgecli import cache

    groups = cache.read(cache.BROWSER).get("groups", [])
    return [CompletionItem(g) for g in sorted(set(groups)) if _safe(g) and g.startswith(incomplete)]


def browser_targets(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Browser labels and ids last seen by `bridge browser targets`."""
    from bridgecli import cache

    items: dict[str, CompletionItem] = {}
    for t in cache.read(cache.BROWSER).get("targets", []):
        if not isinstance(t, dict):
            continue
        label, ident = t.get("label"), t.get("id")
        if _safe(label) and label.startswith(incomplete):
            items[label] = CompletionItem(label, help=_inert(f"browser {ident}"))
        if _safe(ident) and ident.startswith(incomplete) and ident not in items:
            items[ident] = CompletionItem(ident, help=_inert(f"browser {label}"))
    return [items[k] for k in sorted(items)]


def clients(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """CLIENT of install/uninstall: the known clients not named yet on the line."""
    named = set((ctx.params or {}).get("names") or ())
    return [CompletionItem(n, help=t) for n, t in CLIENTS.items() if n.startswith(incomplete) and n not in named]
