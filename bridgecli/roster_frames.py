"""Roster frames (docs/protocol.md#4-presence-frames-bridgeroster): host frames, one per
gateway per interval carrying all its entities, full or as a delta; the ``sync`` request a
joining gateway sends; and the per-entity heartbeats and ``gone`` frames of the first
protocol, which gateways still send.

Encoding and the checks on decoding, pure: :class:`bridgecli.roster.RosterView` applies what
:func:`parse_host_frame` accepts. Every field came from another host, so each is bounded and
sanitised here (docs/roster.md).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bridgecli.sanitize import sanitize_line

GATEWAY_KEY = "_gateway"
#: the per-entity protocol's frame version
FRAME_VERSION = 1
#: the ``roster`` marker of host frames and of a new gateway's legacy ``_gateway`` heartbeat
PROTOCOL = 2
#: the longest interval a frame may announce, in seconds: a larger one is cut to this, so no
#: host can pin an entry in everyone's view by announcing that it beats once a decade
MAX_INTERVAL = 300.0
DEFAULT_INTERVAL = 5.0
#: the longest text field (label, role, status, …) kept from a frame
MAX_TEXT = 200
#: the longest host id or gid a frame may carry
MAX_NAME = 128
#: most entities (listed, changed or removed) one host frame may carry
MAX_HOST_ENTITIES = 2000
#: the largest frame a view decodes, in bytes
MAX_FRAME_BYTES = 1 << 20
#: most profile names kept from one gateway's heartbeat (frames come from other hosts)
MAX_PROFILES = 200
#: a full frame every this many broadcast frames; deltas in between
FULL_EVERY = 6


def text(value: Any, default: str) -> str:
    """A frame's text field made safe to print anywhere (one line, no control characters)."""
    return sanitize_line(default if value is None else str(value), max_chars=MAX_TEXT)


def number(value: Any, default: float) -> float:
    """A finite float from a frame, else ``default`` (JSON lets NaN and Infinity through)."""
    try:
        result = float(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return result if math.isfinite(result) else default


def capped_interval(value: Any) -> float:
    """The interval a frame announces, cut to :data:`MAX_INTERVAL` (default when absent,
    non-positive or not a number)."""
    interval = number(value, DEFAULT_INTERVAL)
    return min(interval, MAX_INTERVAL) if interval > 0 else DEFAULT_INTERVAL


def safe_name(name: str) -> bool:
    """A host id or gid fit to key a view: 1..MAX_NAME characters, printable, no spaces."""
    return 0 < len(name) <= MAX_NAME and sanitize_line(name) == name and " " not in name


def channels(value: Any) -> tuple[str, ...]:
    """The channel names a frame lists for an entity: the valid ones among the first
    :data:`bridgecli.channels.MAX_PER_ENTITY`, sorted and without repeats."""
    from bridgecli import channels as channels_mod

    if not isinstance(value, list):
        return ()
    listed = value[: channels_mod.MAX_PER_ENTITY]
    return tuple(sorted({name for name in listed if isinstance(name, str) and channels_mod.valid_name(name)}))


def profiles(value: Any) -> tuple[str, ...]:
    return tuple(text(p, "?") for p in value[:MAX_PROFILES]) if isinstance(value, list) else ()


def started(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def heartbeat_frame(
    *,
    host: str,
    version: str,
    interval: float,
    entity: Any = None,
    status: str = "unknown",
    entities: int = 0,
    profiles: Iterable[str] = (),
    started: float | None = None,
    marked: bool = False,
    channels: Iterable[str] = (),
) -> bytes:
    """Encode one heartbeat (an entity's, or the gateway's own when ``entity`` is None, which
    also names the host's spawn profiles and when the gateway started); ``marked`` says in the
    gateway's own that it also speaks host frames, so peers need not send it per-entity ones."""
    frame: dict[str, Any] = {
        "v": FRAME_VERSION,
        "type": "heartbeat",
        "host": host,
        "version": version,
        "interval": interval,
        "ts": time.time(),
    }
    if entity is None:
        frame.update({"gid": GATEWAY_KEY, "entities": entities, "profiles": sorted(profiles)})
        if started is not None:
            frame["started"] = started
        if marked:
            frame["roster"] = PROTOCOL
    else:
        frame.update(entity_item(entity, status, channels))
    return json.dumps(frame, separators=(",", ":")).encode()


def gone_frame(*, host: str, gid: str, reason: str) -> bytes:
    return json.dumps(
        {"v": FRAME_VERSION, "type": "gone", "host": host, "gid": gid, "reason": reason, "ts": time.time()},
        separators=(",", ":"),
    ).encode()


def entity_item(entity: Any, status: str, channels: Iterable[str] = ()) -> dict[str, Any]:
    """One entity as a host frame lists it, with the ``channels`` it is in (equal items mean
    nothing changed)."""
    item = {
        "gid": entity.gid,
        "label": entity.label,
        "role": entity.role,
        "status": status,
        "backend": entity.backend,
        "since": entity.created,
    }
    if channels:
        item["channels"] = sorted(set(channels))
    return item


def host_frame(
    *,
    host: str,
    version: str,
    interval: float,
    seq: int,
    full: bool,
    items: Iterable[dict[str, Any]],
    removed: Iterable[str] = (),
    count: int = 0,
    profiles: Iterable[str] = (),
    started: float | None = None,
) -> bytes:
    """Encode a host frame: ``full`` lists every entity (the host's whole truth), else
    ``changed`` lists the added or changed ones and ``removed`` the gids gone since frame
    ``seq - 1``."""
    frame = host_frame_fields(
        host=host,
        version=version,
        interval=interval,
        seq=seq,
        full=full,
        items=items,
        removed=removed,
        count=count,
        profiles=profiles,
        started=started,
    )
    return json.dumps(frame, separators=(",", ":")).encode()


def host_frame_fields(
    *,
    host: str,
    version: str,
    interval: float,
    seq: int,
    full: bool,
    items: Iterable[dict[str, Any]],
    removed: Iterable[str] = (),
    count: int = 0,
    profiles: Iterable[str] = (),
    started: float | None = None,
) -> dict[str, Any]:
    """:func:`host_frame` before encoding (a relay forwards frames inside its own)."""
    frame: dict[str, Any] = {
        "v": PROTOCOL,
        "type": "host",
        "host": host,
        "gid": GATEWAY_KEY,
        "roster": PROTOCOL,
        "version": version,
        "interval": interval,
        "ts": time.time(),
        "seq": seq,
        "full": full,
        "count": count,
    }
    if full:
        frame["entities"] = list(items)
        frame["profiles"] = sorted(profiles)
        if started is not None:
            frame["started"] = started
    else:
        frame["changed"] = list(items)
        frame["removed"] = list(removed)
    return frame


def sync_frame(*, host: str, reply: str, hosts: Iterable[str] | None = None) -> bytes:
    """A joining gateway's request for every host's full frame, answered on ``reply``
    (its reply key ``reply.<host>.<uuid>`` on ``bridge.ctl``); with ``hosts``, only those
    hosts' frames (a gateway fed by a relay asking for what its digests say it lacks)."""
    frame: dict[str, Any] = {
        "v": PROTOCOL,
        "type": "sync",
        "host": host,
        "gid": GATEWAY_KEY,
        "reply": reply,
        "ts": time.time(),
    }
    if hosts is not None:
        frame["hosts"] = sorted(set(hosts))
    return json.dumps(frame, separators=(",", ":")).encode()


@dataclass
class Item:
    """One entity of a host frame, sanitised."""

    gid: str
    label: str
    role: str
    status: str
    backend: str
    since: float
    channels: tuple[str, ...]


@dataclass
class HostFrame:
    """A host frame that passed :func:`parse_host_frame`."""

    host: str
    seq: int
    full: bool
    interval: float
    version: str
    items: list[Item] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    #: gids refused because they are not fit names
    unsafe: int = 0
    count: int = 0
    profiles: tuple[str, ...] = ()
    started: float | None = None


def parse_item(raw: Any, now: float) -> Item | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("gid"), str) or not safe_name(raw["gid"]):
        return None
    return Item(
        gid=raw["gid"],
        label=text(raw.get("label"), "?"),
        role=text(raw.get("role"), "?"),
        status=text(raw.get("status"), "unknown"),
        backend=text(raw.get("backend"), "?"),
        since=number(raw.get("since") or now, now),
        channels=channels(raw.get("channels")),
    )


def parse_host_frame(frame: dict[str, Any], host: str, now: float) -> HostFrame | None:
    """The host frame in ``frame`` (already known to speak for ``host``), or None when it
    is malformed or carries more than :data:`MAX_HOST_ENTITIES` entities."""
    get = frame.get
    seq, full = get("seq"), get("full")
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(full, bool):
        return None
    listed = get("entities") if full else get("changed")
    removed = [] if full else get("removed")
    if not isinstance(listed, list) or not isinstance(removed, list):
        return None
    if len(listed) + len(removed) > MAX_HOST_ENTITIES:
        return None
    parsed = HostFrame(host, seq, full, capped_interval(get("interval")), text(get("version"), "?"))
    for raw in listed:
        item = parse_item(raw, now)
        if item is None:
            parsed.unsafe += 1
        else:
            parsed.items.append(item)
    parsed.removed = [g for g in removed if isinstance(g, str) and safe_name(g)]
    count = get("count")
    parsed.count = count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0
    if full:
        parsed.profiles, parsed.started = profiles(get("profiles")), started(get("started"))
    return parsed
