"""Roster relay frames (docs/roster.md#the-roster-relay): what a relay publishes, what a
gateway asks it, and the digest both sides compare.

A relay consumes every host's frames from one queue and publishes, once a second, one frame
under ``relay.<name>`` on ``bridge.roster``: full host frames rebuilt for hosts that changed,
per-entity and ``gone`` frames as they came, and one ``alive`` row per host with a digest of
its part of the view. A gateway whose own digest of a host differs asks the relay for that
host's full frame. Pure.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bridgecli.roster_frames import PROTOCOL, capped_interval, host_frame_fields, safe_name, text

#: the broker user a hub's relay runs as; no host id can be spelled with a dot
RELAY_USER = "bridge.relay"
#: the queue every relay consumes (single active consumer): all host frames, bound ``roster.#``
RELAY_QUEUE = "bridge.roster.relay"
#: routing keys of relay frames on ``bridge.roster``
RELAY_KEY_PREFIX = "relay."
#: a relay frame is published this often, in seconds
RELAY_EVERY = 1.0
#: the largest relay frame a view decodes, in bytes (a whole-view answer is split below it)
MAX_RELAY_BYTES = 8 << 20
#: a whole-view answer is cut into frames of at most about this many bytes
ANSWER_CHUNK_BYTES = 1 << 20
#: most forwarded frames and alive rows one relay frame may carry
MAX_RELAY_FRAMES = 20_000
MAX_ALIVE_ROWS = 50_000
#: the digest's length in hex characters
DIGEST_HEX = 16


def relay_key(name: str) -> str:
    return f"{RELAY_KEY_PREFIX}{name}"


def relay_name_of(key: str) -> str | None:
    """The relay a ``relay.<name>`` routing key names, else None."""
    if not key.startswith(RELAY_KEY_PREFIX):
        return None
    name = key[len(RELAY_KEY_PREFIX) :]
    return name if safe_name(name) and "." not in name else None


def host_digest(entries: Iterable[Any], version: str, profiles: Iterable[str], started: float | None) -> str:
    """What a view knows of one host, in :data:`DIGEST_HEX` hex characters: its entities
    (RosterEntry-like: gid, label, role, status, backend, since, channels) and its gateway's
    version, profiles and start. Equal digests mean equal parts of two views."""
    rows = sorted((e.gid, e.label, e.role, e.status, e.backend, float(e.since), list(e.channels)) for e in entries)
    body = json.dumps([rows, version, sorted(profiles), started], separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:DIGEST_HEX]


def full_host_frame(
    host: str,
    entries: Iterable[Any],
    *,
    seq: int,
    version: str,
    interval: float,
    profiles: Iterable[str],
    started: float | None,
) -> dict[str, Any]:
    """A full host frame rebuilt from a view's entries of ``host`` (what a relay forwards)."""
    items = []
    for e in sorted(entries, key=lambda entry: entry.gid):
        item = {"gid": e.gid, "label": e.label, "role": e.role, "status": e.status, "backend": e.backend}
        item["since"] = e.since
        if e.channels:
            item["channels"] = list(e.channels)
        items.append(item)
    return host_frame_fields(
        host=host,
        version=version,
        interval=interval,
        seq=seq,
        full=True,
        items=items,
        count=len(items),
        profiles=profiles,
        started=started,
    )


@dataclass
class AliveRow:
    """A host the relay hears: its last sequence number, its digest (None while the relay is
    not synced with it, so no view replaces anything on its word) and its interval."""

    host: str
    seq: int
    digest: str | None
    interval: float

    def encode(self) -> list[Any]:
        return [self.host, self.seq, self.digest, self.interval]


@dataclass
class RelayFrame:
    """A relay frame that passed :func:`parse_relay_frame`."""

    relay: str
    epoch: str
    seq: int
    interval: float
    #: roster frames (dicts) to apply as if each came under its own host's key
    frames: list[dict[str, Any]] = field(default_factory=list)
    alive: list[AliveRow] = field(default_factory=list)
    #: frames the relay refused, by reason (its RosterView's counts)
    refused: dict[str, int] = field(default_factory=dict)
    #: a sync answer (on a reply key), not a broadcast
    answer: bool = False
    #: the last part of an answer split in several frames
    last: bool = True


def relay_frame(
    *,
    relay: str,
    epoch: str,
    seq: int,
    frames: Iterable[dict[str, Any]] = (),
    alive: Iterable[AliveRow] = (),
    refused: dict[str, int] | None = None,
    answer: bool = False,
    last: bool = True,
    interval: float = RELAY_EVERY,
) -> bytes:
    frame = {
        "v": PROTOCOL,
        "type": "relay",
        "relay": relay,
        "epoch": epoch,
        "seq": seq,
        "interval": interval,
        "ts": time.time(),
        "frames": list(frames),
        "alive": [row.encode() for row in alive],
        "refused": dict(refused or {}),
        "answer": answer,
        "last": last,
    }
    return json.dumps(frame, separators=(",", ":")).encode()


def answer_frames(
    *, relay: str, epoch: str, seq: int, frames: list[dict[str, Any]], chunk_bytes: int = ANSWER_CHUNK_BYTES
) -> list[bytes]:
    """A sync answer carrying ``frames``, split into relay frames of about ``chunk_bytes``."""
    parts: list[list[dict[str, Any]]] = [[]]
    size = 0
    for frame in frames:
        length = len(json.dumps(frame, separators=(",", ":")))
        if parts[-1] and size + length > chunk_bytes:
            parts.append([])
            size = 0
        parts[-1].append(frame)
        size += length
    return [
        relay_frame(relay=relay, epoch=epoch, seq=seq, frames=part, answer=True, last=i == len(parts) - 1)
        for i, part in enumerate(parts)
    ]


def parse_relay_frame(body: bytes) -> RelayFrame | None:
    """The relay frame in ``body``, or None when it is malformed or too large. Its forwarded
    frames are not judged here: the view judges each as it would a host's own."""
    if len(body) > MAX_RELAY_BYTES:
        return None
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or raw.get("type") != "relay":
        return None
    relay, epoch, seq = raw.get("relay"), raw.get("epoch"), raw.get("seq")
    frames, alive, refused = raw.get("frames"), raw.get("alive"), raw.get("refused") or {}
    if not (isinstance(relay, str) and safe_name(relay) and isinstance(epoch, str) and safe_name(epoch)):
        return None
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(frames, list):
        return None
    if not isinstance(alive, list) or not isinstance(refused, dict):
        return None
    if len(frames) > MAX_RELAY_FRAMES or len(alive) > MAX_ALIVE_ROWS:
        return None
    rows = [row for row in (_alive_row(r) for r in alive) if row is not None]
    counts = {text(k, "?"): v for k, v in list(refused.items())[:32] if isinstance(v, int) and v >= 0}
    return RelayFrame(
        relay=relay,
        epoch=epoch,
        seq=seq,
        interval=capped_interval(raw.get("interval")),
        frames=[f for f in frames if isinstance(f, dict)],
        alive=rows,
        refused=counts,
        answer=raw.get("answer") is True,
        last=raw.get("last") is not False,
    )


def _alive_row(raw: Any) -> AliveRow | None:
    if not isinstance(raw, list) or len(raw) != 4:
        return None
    host, seq, digest, interval = raw
    if not (isinstance(host, str) and safe_name(host)) or not isinstance(seq, int) or isinstance(seq, bool):
        return None
    if digest is not None and not (isinstance(digest, str) and len(digest) == DIGEST_HEX):
        return None
    return AliveRow(host, seq, digest, capped_interval(interval))
