"""The presence roster (docs/design.md#invariant-8, use case U5): a union "who / where / status" view built from
heartbeats, soft state only.

Each gateway publishes one heartbeat per local entity per interval on ``bridge.roster`` with
routing key ``roster.<host>.<gid>``, plus one for itself (``roster.<host>._gateway``) so
that a host with no entities is still known to be alive — which is what lets ``bridge
spawn`` fail fast for a host with no live gateway. Entries expire after
``roster.expiry_missed`` missed intervals; ``gone`` announcements remove them at once.

This module is pure (no pika): the gateway and ``bridge roster`` feed it decoded frames.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from bridgecli.amqp.topology import ROSTER as EXCHANGE

GATEWAY_KEY = "_gateway"
FRAME_VERSION = 1
#: most profile names kept from one gateway's heartbeat (frames come from other hosts)
MAX_PROFILES = 200


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
) -> bytes:
    """Encode one heartbeat (an entity's, or the gateway's own when ``entity`` is None, which
    also names the host's spawn profiles and when the gateway started)."""
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
    else:
        frame.update(
            {
                "gid": entity.gid,
                "label": entity.label,
                "role": entity.role,
                "status": status,
                "backend": entity.backend,
                "since": entity.created,
            }
        )
    return json.dumps(frame, separators=(",", ":")).encode()


def gone_frame(*, host: str, gid: str, reason: str) -> bytes:
    return json.dumps(
        {"v": FRAME_VERSION, "type": "gone", "host": host, "gid": gid, "reason": reason, "ts": time.time()},
        separators=(",", ":"),
    ).encode()


def spawned_entry(handle: dict[str, Any], *, interval: float, now: float | None = None) -> RosterEntry:
    """A roster entry from a spawn answer (gid, host, label, role, deliver)."""
    now = time.time() if now is None else now
    return RosterEntry(
        gid=str(handle["gid"]),
        label=str(handle.get("label", "?")),
        role=str(handle.get("role", "agent")),
        host=str(handle["host"]),
        status="unknown",
        backend=str(handle.get("deliver") or "?").split(":", 1)[0],
        since=now,
        version="?",
        last_seen=now,
        interval=interval,
    )


class RosterView:
    """The union view; thread-safe. ``expiry_missed`` intervals without a heartbeat expire
    an entry (each entry carries its own gateway's interval)."""

    def __init__(self, expiry_missed: int = 3) -> None:
        self.expiry_missed = expiry_missed
        self._entries: dict[str, RosterEntry] = {}
        self._gateways: dict[str, GatewayEntry] = {}
        self._lock = threading.Lock()
        self.changes = 0
        #: frames ignored because their body did not match their routing key
        self.refused = 0

    def apply(self, body: bytes, now: float | None = None, key: str | None = None) -> bool:
        """Apply one frame from ``bridge.roster``; malformed frames are ignored (soft state).

        ``key`` is the routing key the frame arrived with (``""`` when it did not come
        through ``bridge.roster`` at all): a frame whose body claims another host or gid than
        its key is ignored. The broker's topic permissions decide which keys a host's user may
        publish (``roster.<its host>.*``, docs/deploy.md), so this check is what stops one
        host from announcing — or retiring — another host's entities. False when ignored."""
        now = time.time() if now is None else now
        try:
            frame = json.loads(body)
            kind, host, gid = frame["type"], str(frame["host"]), str(frame["gid"])
        except (ValueError, KeyError, TypeError):
            return False
        if key is not None and key != routing_key(host, gid):
            self.refused += 1
            return False
        with self._lock:
            if kind == "gone":
                if gid == GATEWAY_KEY:
                    self._gateways.pop(host, None)
                    for gone in [g for g, e in self._entries.items() if e.host == host]:
                        del self._entries[gone]
                else:
                    self._entries.pop(gid, None)
                self.changes += 1
                return True
            if kind != "heartbeat":
                return False
            interval = float(frame.get("interval") or 5.0)
            if gid == GATEWAY_KEY:
                named, started = frame.get("profiles"), frame.get("started")
                self._gateways[host] = GatewayEntry(
                    host,
                    str(frame.get("version", "?")),
                    now,
                    interval,
                    int(frame.get("entities", 0)),
                    tuple(str(p) for p in named[:MAX_PROFILES]) if isinstance(named, list) else (),
                    float(started) if isinstance(started, (int, float)) else None,
                )
                return True
            label, role = str(frame.get("label", "?")), str(frame.get("role", "?"))
            status, backend = str(frame.get("status", "unknown")), str(frame.get("backend", "?"))
            since, version = float(frame.get("since") or now), str(frame.get("version", "?"))
            previous = self._entries.get(gid)
            if previous is not None and (
                previous.label,
                previous.role,
                previous.host,
                previous.status,
                previous.backend,
                previous.since,
                previous.version,
            ) == (label, role, host, status, backend, since, version):
                previous.last_seen, previous.interval = now, interval  # the common case: a refresh
                return True
            self._entries[gid] = RosterEntry(
                gid=gid,
                label=label,
                role=role,
                host=host,
                status=status,
                backend=backend,
                since=since,
                version=version,
                last_seen=now,
                interval=interval,
            )
            if previous is None or previous.status != status:
                self.changes += 1
            return True

    def expire(self, now: float | None = None) -> list[RosterEntry]:
        """Drop entries (and gateways) not heard from for ``expiry_missed`` intervals."""
        now = time.time() if now is None else now
        expired: list[RosterEntry] = []
        with self._lock:
            for gid, entry in list(self._entries.items()):
                if now - entry.last_seen > entry.interval * self.expiry_missed:
                    expired.append(self._entries.pop(gid))
            for host, gateway in list(self._gateways.items()):
                if now - gateway.last_seen > gateway.interval * self.expiry_missed:
                    del self._gateways[host]
            if expired:
                self.changes += 1
        return expired

    def add_if_absent(self, entry: RosterEntry) -> bool:
        """Add an entity we learnt of before its first heartbeat (a spawn answer); a
        heartbeat that came first wins. It then refreshes and expires like any entry."""
        with self._lock:
            if entry.gid in self._entries:
                return False
            self._entries[entry.gid] = entry
            self.changes += 1
            return True

    def get(self, gid: str) -> RosterEntry | None:
        with self._lock:
            return self._entries.get(gid)

    def entries(self, host: str | None = None) -> list[RosterEntry]:
        with self._lock:
            rows = list(self._entries.values())
        if host:
            rows = [r for r in rows if r.host == host]
        return sorted(rows, key=lambda r: (r.host, r.label, r.gid))

    def gateways(self) -> list[GatewayEntry]:
        with self._lock:
            return sorted(self._gateways.values(), key=lambda g: g.host)

    def host_alive(self, host: str) -> bool:
        with self._lock:
            return host in self._gateways

    def load(self, rows: Iterable[dict[str, Any]]) -> None:
        """Fill from another view's ``as_dict`` rows (used by tests and tools)."""
        with self._lock:
            for row in rows:
                self._entries[row["gid"]] = RosterEntry(**row)
