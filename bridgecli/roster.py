"""The presence roster (docs/design.md#invariant-8): a union "who / where / status" view
built from heartbeats, soft state only.

Each gateway publishes one heartbeat per local entity per interval on ``bridge.roster`` under
``roster.<host>.<gid>``, plus ``roster.<host>._gateway`` so that a host with no entities is
still known to be alive. Entries expire after ``roster.expiry_missed`` missed intervals;
``gone`` frames remove them at once. Frames come from other hosts, so the view believes one
only as far as the broker vouches for it (:meth:`RosterView.apply`) and sanitises the rest.
Pure: the gateway and ``bridge roster`` feed it decoded frames.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from bridgecli import channels as channels_mod
from bridgecli import gids
from bridgecli.amqp.topology import ROSTER as EXCHANGE
from bridgecli.sanitize import sanitize_line

if TYPE_CHECKING:
    from bridgecli.gateway.identity import IdentityPolicy

GATEWAY_KEY = "_gateway"
FRAME_VERSION = 1
#: most profile names kept from one gateway's heartbeat (frames come from other hosts)
MAX_PROFILES = 200
#: the longest interval a frame may announce, in seconds: a larger one is cut to this, so no
#: host can pin an entry in everyone's view by announcing that it beats once a decade
MAX_INTERVAL = 300.0
DEFAULT_INTERVAL = 5.0
#: the longest text field (label, role, status, …) kept from a frame
MAX_TEXT = 200
#: the longest host id or gid a frame may carry
MAX_NAME = 128

#: why frames were refused, as :meth:`RosterView.refused_frames` counts them
KEY_MISMATCH = "key_mismatch"  # body names another host or gid than its key, or not via bridge.roster
DEAD_LETTERED = "dead_lettered"  # dead-lettered into bridge.roster: the key was never checked
USER_MISMATCH = "user_mismatch"  # published by a broker user that may not speak for the key's host
FOREIGN_GID = "foreign_gid"  # the gid belongs to another host
UNSAFE_NAME = "unsafe_name"  # a host id or gid with control characters, or too long
REASONS = (KEY_MISMATCH, DEAD_LETTERED, USER_MISMATCH, FOREIGN_GID, UNSAFE_NAME)
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
    #: the channels the entity is in, as its gateway announced them
    channels: tuple[str, ...] = ()

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
    channels: Iterable[str] = (),
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
        if channels:
            frame["channels"] = list(channels)
    return json.dumps(frame, separators=(",", ":")).encode()


def gone_frame(*, host: str, gid: str, reason: str) -> bytes:
    return json.dumps(
        {"v": FRAME_VERSION, "type": "gone", "host": host, "gid": gid, "reason": reason, "ts": time.time()},
        separators=(",", ":"),
    ).encode()


def _text(value: Any, default: str) -> str:
    """A frame's text field made safe to print anywhere (one line, no control characters)."""
    return sanitize_line(default if value is None else str(value), max_chars=MAX_TEXT)


def _number(value: Any, default: float) -> float:
    """A finite float from a frame, else ``default`` (JSON lets NaN and Infinity through)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return number if math.isfinite(number) else default


def capped_interval(value: Any) -> float:
    """The interval a frame announces, cut to :data:`MAX_INTERVAL` (default when absent,
    non-positive or not a number)."""
    interval = _number(value, DEFAULT_INTERVAL)
    return min(interval, MAX_INTERVAL) if interval > 0 else DEFAULT_INTERVAL


def _safe_name(name: str) -> bool:
    return 0 < len(name) <= MAX_NAME and sanitize_line(name) == name and " " not in name


def _channel_names(value: Any) -> tuple[str, ...]:
    """The channel names a frame lists: valid names only, at most
    :data:`bridgecli.channels.MAX_PER_ENTITY`, sorted and without repeats."""
    if not isinstance(value, list):
        return ()
    return tuple(sorted({name for name in value[: channels_mod.MAX_PER_ENTITY] if channels_mod.valid_name(name)}))


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


class RosterView:
    """The union view; thread-safe. ``expiry_missed`` intervals without a heartbeat expire
    an entry (each entry carries its own gateway's interval, at most :data:`MAX_INTERVAL`).

    ``policy`` is the identity policy (``security.sender_check``): with the check on, a frame
    counts only when its publisher's broker user may speak for the host in its routing key,
    and a gid not minted on that host is taken only as a legacy gid that host announced
    first. ``local_host`` is this host's id, known as a host from the start."""

    def __init__(
        self, expiry_missed: int = 3, policy: IdentityPolicy | None = None, local_host: str | None = None
    ) -> None:
        self.expiry_missed = expiry_missed
        self.policy = policy
        self._entries: dict[str, RosterEntry] = {}
        self._gateways: dict[str, GatewayEntry] = {}
        self._lock = threading.Lock()
        self.changes = 0
        self._refused = dict.fromkeys(REASONS, 0)
        #: tag -> host for every host heard from: a gid with a known host's tag is that host's
        self._tags: dict[str, str] = {}
        #: legacy (untagged) gid -> the host first heard announcing it (check on only)
        self._legacy: dict[str, str] = {}
        if local_host:
            self._tags[gids.host_tag(local_host)] = local_host

    def use_policy(self, policy: IdentityPolicy) -> None:
        """Judge frames by ``policy`` from now on (a gateway re-reads it at each connect)."""
        with self._lock:
            self.policy = policy

    @property
    def checking(self) -> bool:
        return self.policy is not None and self.policy.mode != "off"

    @property
    def refused(self) -> int:
        """How many frames were refused, for every reason."""
        return sum(self._refused.values())

    def refused_frames(self) -> dict[str, int]:
        """Refused frames by reason (:data:`REASONS`), for ``bridge status`` and ``bridge
        roster --json``: a count that grows says some host sends frames it may not."""
        with self._lock:
            return dict(self._refused)

    def _refuse(self, reason: str) -> bool:
        with self._lock:
            self._refused[reason] += 1
        return False

    def apply_delivery(self, method: Any, props: Any, body: bytes, now: float | None = None) -> bool:
        """:meth:`apply` for a frame as pika delivered it (its exchange, routing key, headers
        and ``user_id`` decide whether it counts)."""
        if dead_lettered(props):
            return self._refuse(DEAD_LETTERED)
        return self.apply(body, now, key=arrival_key(method), user_id=getattr(props, "user_id", None))

    def _speaks_for(self, user_id: str | None, host: str) -> bool:
        policy = self.policy
        if policy is None or policy.mode == "off":
            return True
        return bool(user_id) and (user_id == policy.expected_user(host) or user_id in policy.trusted_users)

    def owner(self, gid: str) -> str | None:
        """The host ``gid`` belongs to as far as this view knows: the host whose tag it
        carries, else the host that first announced it (a legacy gid), else None."""
        with self._lock:
            owner = self._owner(gid)
            entry = self._entries.get(gid)
        return owner if owner is not None else (entry.host if entry is not None else None)

    def _owner(self, gid: str) -> str | None:
        """The host ``gid`` belongs to as far as this view knows (lock held)."""
        tagged = self._tags.get(gid[: gids.TAG_HEX])
        return tagged if tagged is not None else self._legacy.get(gid)

    def apply(self, body: bytes, now: float | None = None, key: str | None = None, user_id: str | None = None) -> bool:
        """Apply one frame from ``bridge.roster``; False when it is ignored. Never raises.

        Malformed frames are ignored; refused ones are ignored and counted
        (:meth:`refused_frames`): a body naming another host or gid than ``key`` (its routing
        key; ``""`` when it did not come through ``bridge.roster``); under the sender check, a
        ``user_id`` that is not the key host's user; a gid that belongs to another host (a
        known host's tag, or under the check a legacy gid another host announced first); a
        host id or gid with control characters. Text is sanitised and the interval capped
        (docs/roster.md).
        """
        now = time.time() if now is None else now
        try:
            frame = json.loads(body)
            kind, host, gid = frame["type"], str(frame["host"]), str(frame["gid"])
            get = frame.get
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return False
        if key is not None and key != routing_key(host, gid):
            return self._refuse(KEY_MISMATCH)
        if not self._speaks_for(user_id, host):
            return self._refuse(USER_MISMATCH)
        if not (_safe_name(host) and _safe_name(gid)):
            return self._refuse(UNSAFE_NAME)
        if kind not in ("gone", "heartbeat"):
            return False
        tag = gids.host_tag(host)
        with self._lock:
            self._tags.setdefault(tag, host)
            if gid != GATEWAY_KEY and not gids.minted_on(gid, host) and self._owner(gid) not in (None, host):
                self._refused[FOREIGN_GID] += 1
                return False
            if kind == "gone":
                return self._gone(host, gid)
            if gid == GATEWAY_KEY:
                self._gateway_heard(host, get, now)
                return True
            if self.checking and not gids.minted_on(gid, host):
                self._legacy.setdefault(gid, host)
            self._entity_heard(host, gid, get, now)
            return True

    def _gone(self, host: str, gid: str) -> bool:
        if gid == GATEWAY_KEY:
            self._gateways.pop(host, None)
            for gone in [g for g, e in self._entries.items() if e.host == host]:
                del self._entries[gone]
        else:
            entry = self._entries.get(gid)
            if entry is not None and entry.host != host:
                self._refused[FOREIGN_GID] += 1  # a host retires only its own entries
                return False
            self._entries.pop(gid, None)
        self.changes += 1
        return True

    def _gateway_heard(self, host: str, get: Any, now: float) -> None:
        named, started = get("profiles"), get("started")
        try:
            entities = int(get("entities", 0))
        except (TypeError, ValueError, OverflowError):
            entities = 0
        self._gateways[host] = GatewayEntry(
            host,
            _text(get("version"), "?"),
            now,
            capped_interval(get("interval")),
            entities,
            tuple(_text(p, "?") for p in named[:MAX_PROFILES]) if isinstance(named, list) else (),
            float(started) if isinstance(started, (int, float)) and math.isfinite(started) else None,
        )

    def _entity_heard(self, host: str, gid: str, get: Any, now: float) -> None:
        label, role = _text(get("label"), "?"), _text(get("role"), "?")
        status, backend = _text(get("status"), "unknown"), _text(get("backend"), "?")
        since, version = _number(get("since") or now, now), _text(get("version"), "?")
        interval = capped_interval(get("interval"))
        channels = _channel_names(get("channels"))
        previous = self._entries.get(gid)
        if previous is not None and (
            previous.label,
            previous.role,
            previous.host,
            previous.status,
            previous.backend,
            previous.since,
            previous.version,
            previous.channels,
        ) == (label, role, host, status, backend, since, version, channels):
            previous.last_seen, previous.interval = now, interval  # the common case: a refresh
            return
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
            channels=channels,
        )
        if previous is None or (previous.status, previous.host, previous.channels) != (status, host, channels):
            self.changes += 1

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
                entry = RosterEntry(**row)
                entry.channels = tuple(entry.channels)
                self._entries[row["gid"]] = entry
