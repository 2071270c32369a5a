"""The presence roster (docs/design.md#invariant-8): a union "who / where / status" view
built from heartbeats, soft state only.

Each gateway publishes one host frame per interval on ``bridge.roster`` under
``roster.<host>._gateway`` carrying all its entities, full or as a delta
(:mod:`bridgecli.roster_frames`); older gateways send per-entity heartbeats
(``roster.<host>.<gid>``), which the view takes too. Entries expire after
``roster.expiry_missed`` intervals without a frame; ``gone`` frames remove them at once. The
view believes a frame only as far as the broker vouches for it (:meth:`RosterView.apply`)
and sanitises the rest. Pure: the gateway and ``bridge roster`` feed it frames.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from bridgecli import gids, roster_hosts
from bridgecli.amqp.topology import CONTROL, reply_key_host
from bridgecli.amqp.topology import ROSTER as EXCHANGE
from bridgecli.relay_frames import (
    RELAY_KEY_PREFIX,
    AliveRow,
    host_digest,
)
from bridgecli.roster_entries import DEAD_LETTERED as DEAD_LETTERED
from bridgecli.roster_entries import FLOODED as FLOODED
from bridgecli.roster_entries import FOREIGN_GID as FOREIGN_GID
from bridgecli.roster_entries import KEY_MISMATCH as KEY_MISMATCH
from bridgecli.roster_entries import REASONS as REASONS
from bridgecli.roster_entries import TOO_LARGE as TOO_LARGE
from bridgecli.roster_entries import UNSAFE_NAME as UNSAFE_NAME
from bridgecli.roster_entries import USER_MISMATCH as USER_MISMATCH
from bridgecli.roster_entries import GatewayEntry as GatewayEntry
from bridgecli.roster_entries import RosterEntry as RosterEntry
from bridgecli.roster_entries import arrival_key as arrival_key
from bridgecli.roster_entries import dead_lettered as dead_lettered
from bridgecli.roster_entries import routing_key as routing_key
from bridgecli.roster_entries import spawned_entry as spawned_entry
from bridgecli.roster_frames import DEFAULT_INTERVAL as DEFAULT_INTERVAL
from bridgecli.roster_frames import FRAME_VERSION as FRAME_VERSION
from bridgecli.roster_frames import GATEWAY_KEY as GATEWAY_KEY
from bridgecli.roster_frames import MAX_FRAME_BYTES, MAX_HOST_ENTITIES, PROTOCOL, HostFrame, parse_host_frame
from bridgecli.roster_frames import MAX_INTERVAL as MAX_INTERVAL
from bridgecli.roster_frames import MAX_NAME as MAX_NAME
from bridgecli.roster_frames import MAX_TEXT as MAX_TEXT
from bridgecli.roster_frames import capped_interval as capped_interval
from bridgecli.roster_frames import channels as _channels
from bridgecli.roster_frames import gone_frame as gone_frame
from bridgecli.roster_frames import heartbeat_frame as heartbeat_frame
from bridgecli.roster_frames import number as _number
from bridgecli.roster_frames import profiles as _profiles
from bridgecli.roster_frames import safe_name as _safe_name
from bridgecli.roster_frames import started as _started
from bridgecli.roster_frames import text as _text
from bridgecli.roster_hosts import HostStates
from bridgecli.roster_relayed import FloodBudget, RelayFeed, is_relay_body

if TYPE_CHECKING:
    from bridgecli.gateway.identity import IdentityPolicy


class RosterView:
    """The union view; thread-safe. ``expiry_missed`` intervals without a frame expire
    an entry (each entry carries its own gateway's interval, at most :data:`MAX_INTERVAL`).

    ``policy`` is the identity policy (``security.sender_check``): with the check on, a frame
    counts only when its publisher's broker user may speak for the host in its routing key,
    and a gid not minted on that host is taken only as a legacy gid that host announced
    first. ``local_host``: this host's id; ``on_sync(host, reply_key, hosts)`` runs for
    each vetted ``sync`` request; ``on_epoch(relay, epoch)`` for each new relay epoch."""

    def __init__(
        self,
        expiry_missed: int = 3,
        policy: IdentityPolicy | None = None,
        local_host: str | None = None,
        on_sync: Callable[[str, str, list[str] | None], None] | None = None,
        on_epoch: Callable[[str, str], None] | None = None,
    ) -> None:
        self.expiry_missed = expiry_missed
        self.policy = policy
        self.local_host = local_host
        self.on_sync = on_sync
        self._hosts = HostStates(local_host)
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
        #: the relay feed (roster_relayed) and every other sender's flood budget
        self.relay = RelayFeed(self, on_epoch)
        self.flood = FloodBudget()
        #: no expiry before this (wall clock; hold_expiry), and spawn entries' shelter from full frames
        self._held_until = 0.0
        self._spawned: dict[str, float] = {}
        #: host -> its digest (relay_frames.host_digest), dropped whenever its part changes
        self._digests: dict[str, str] = {}

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

    def refuse(self, reason: str) -> bool:
        with self._lock:
            self._refused[reason] += 1
        return False

    def apply_delivery(self, method: Any, props: Any, body: bytes, now: float | None = None) -> bool:
        """:meth:`apply` for a frame as pika delivered it (its exchange, routing key, headers
        and ``user_id`` decide whether it counts); a relay frame goes to :attr:`relay`; any
        other frame past its sender's flood budget is refused undecoded."""
        now = time.time() if now is None else now
        if dead_lettered(props):
            return self.refuse(DEAD_LETTERED)
        user_id = getattr(props, "user_id", None)
        exchange, key = getattr(method, "exchange", None), str(getattr(method, "routing_key", ""))
        # a sync answer on our own reply key: only the publisher's user vouches for it
        if exchange == CONTROL and (self.local_host is None or reply_key_host(key) != self.local_host):
            return self.refuse(KEY_MISMATCH)
        answer = exchange == CONTROL
        if (exchange == EXCHANGE and key.startswith(RELAY_KEY_PREFIX)) or (answer and is_relay_body(body)):
            return self.relay.deliver(answer, key, user_id, body, now)
        # the sender: its broker user under the check, else the key's host (hosts may share a user)
        if not self.flood.spend((self.checking and user_id) or key.partition(".")[2].partition(".")[0], now):
            return self.refuse(FLOODED)
        if answer:
            return self.apply(body, now, user_id=user_id, answer=True)
        return self.apply(body, now, key=arrival_key(method), user_id=user_id)

    def apply_forwarded(self, frame: dict[str, Any], now: float, answer: bool = False) -> bool:
        """A frame a vetted relay frame carried, judged as if it came under its own host's key
        (the relay's user vouched for it); a ``sync`` request is never forwarded."""
        try:
            kind, host, gid = frame["type"], str(frame["host"]), str(frame["gid"])
        except (KeyError, TypeError):
            return False
        if kind not in ("gone", "heartbeat", "host"):
            return self.refuse(KEY_MISMATCH)
        return self._judge(frame, now, routing_key(host, gid), None, answer, relayed=True)

    def alive_rows(self, rows: list[AliveRow], now: float) -> list[str]:
        """Refresh each row's host (its entries and gateway, as any frame of it would); the
        hosts whose non-None digest differs from this view's are returned (wanted)."""
        by_host = {row.host: row for row in rows}
        wanted = []
        with self._lock:
            grouped: dict[str, list[RosterEntry]] = {}
            for entry in self._entries.values():
                row = by_host.get(entry.host)
                if row is not None:
                    entry.last_seen, entry.interval = now, row.interval
                    grouped.setdefault(entry.host, []).append(entry)
            for row in rows:
                gateway = self._gateways.get(row.host)
                if gateway is not None:
                    gateway.last_seen, gateway.interval = now, row.interval
                self._hosts.alive(row.host, now, row.interval)
                if row.digest is not None and row.digest != self._digest(row.host, grouped.get(row.host, [])):
                    wanted.append(row.host)
        return wanted

    def host_digest(self, host: str) -> str:
        """:func:`relay_frames.host_digest` of this view's part for ``host``."""
        with self._lock:
            return self._digest(host, [e for e in self._entries.values() if e.host == host])

    def _digest(self, host: str, entries: list[RosterEntry]) -> str:
        digest = self._digests.get(host)
        if digest is None:
            gateway = self._gateways.get(host)
            if gateway is None:
                digest = host_digest(entries, "?", (), None)
            else:
                digest = host_digest(entries, gateway.version, gateway.profiles, gateway.started)
            self._digests[host] = digest
        return digest

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

    def apply(
        self,
        body: bytes,
        now: float | None = None,
        key: str | None = None,
        user_id: str | None = None,
        answer: bool = False,
    ) -> bool:
        """Apply one frame from ``bridge.roster``; False when it is ignored. Never raises.

        Malformed frames are ignored, refused ones counted
        (:meth:`refused_frames`): a body naming another host or gid than ``key`` (the routing
        key; ``""`` unless it came through ``bridge.roster``); under the sender check, a
        ``user_id`` not the key host's; a gid of another host (a known host's tag, or under the
        check a legacy gid another host announced first); an unsafe host id or gid; a frame too
        large (docs/roster.md). Text is sanitised, the interval capped. ``answer``: a sync
        answer, which may only be a full host frame.
        """
        now = time.time() if now is None else now
        if len(body) > MAX_FRAME_BYTES:
            return self.refuse(TOO_LARGE)
        try:
            frame = json.loads(body)
        except (ValueError, RecursionError):
            return False
        return self._judge(frame, now, key, user_id, answer)

    def _judge(
        self, frame: Any, now: float, key: str | None, user_id: str | None, answer: bool, relayed: bool = False
    ) -> bool:
        try:
            kind, host, gid = frame["type"], str(frame["host"]), str(frame["gid"])
            get = frame.get
        except (KeyError, TypeError, AttributeError):
            return False
        if key is not None and key != routing_key(host, gid):
            return self.refuse(KEY_MISMATCH)
        if not relayed and not self._speaks_for(user_id, host):
            return self.refuse(USER_MISMATCH)
        if not (_safe_name(host) and _safe_name(gid)):
            return self.refuse(UNSAFE_NAME)
        if answer and (kind != "host" or frame.get("full") is not True):
            return False
        if kind == "sync":
            return self._sync_asked(host, get("reply"), get("hosts"))
        if kind not in ("gone", "heartbeat", "host"):
            return False
        if kind == "host":
            parsed = parse_host_frame(frame, host, now)
            if parsed is None:
                return self.refuse(TOO_LARGE) if _oversized(frame) else False
            with self._lock:
                self._tags.setdefault(gids.host_tag(host), host)
                self._host_heard(parsed, get, now, answer)
            return True
        tag = gids.host_tag(host)
        with self._lock:
            self._tags.setdefault(tag, host)
            if gid != GATEWAY_KEY and not gids.minted_on(gid, host) and self._owner(gid) not in (None, host):
                self._refused[FOREIGN_GID] += 1
                return False
            if kind == "gone":
                return self._gone(host, gid)
            unmarked = gid == GATEWAY_KEY and get("roster") != PROTOCOL
            self._hosts.heard_old(host, now, capped_interval(get("interval")), unmarked)
            if gid == GATEWAY_KEY:
                self._gateway_heard(host, get, now)
                return True
            if self.checking and not gids.minted_on(gid, host):
                self._legacy.setdefault(gid, host)
            self._entity_heard(host, gid, get, now)
            return True

    def _gone(self, host: str, gid: str) -> bool:
        self._digests.pop(host, None)
        if gid == GATEWAY_KEY:
            self._gateways.pop(host, None)
            self._hosts.drop(host)
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
        try:
            entities = int(get("entities", 0))
        except (TypeError, ValueError, OverflowError):
            entities = 0
        self._digests.pop(host, None)
        self._gateways[host] = GatewayEntry(
            host,
            _text(get("version"), "?"),
            now,
            capped_interval(get("interval")),
            entities,
            _profiles(get("profiles")),
            _started(get("started")),
        )

    def _sync_asked(self, host: str, reply: Any, hosts: Any) -> bool:
        """A vetted ``sync`` request: answer only one naming a reply key of its own host."""
        if not isinstance(reply, str) or reply_key_host(reply) != host:
            return self.refuse(KEY_MISMATCH)
        if hosts is not None:
            if not isinstance(hosts, list) or len(hosts) > MAX_HOST_ENTITIES:
                return False
            hosts = [h for h in hosts if isinstance(h, str) and _safe_name(h)]
        if self.on_sync is not None:
            self.on_sync(host, reply, hosts)
        return True

    def _host_heard(self, frame: HostFrame, get: Any, now: float, answer: bool) -> None:
        """Apply a host frame (lock held). A full frame is the host's whole truth; a delta
        applies on top; a gap in ``seq`` marks the host unsynced until the next full frame, its
        entries kept. Any frame keeps all the host's entries alive (docs/roster.md)."""
        host = frame.host
        self._digests.pop(host, None)
        booked = self._hosts.frame(frame, now, answer)
        items = [item for item in frame.items if self._owns(host, item.gid)]
        if booked == roster_hosts.FULL:
            # a spawn answer's entry stays for two intervals: the frame may predate it
            listed = {item.gid for item in items} | {g for g, until in self._spawned.items() if until > now}
            gone = [g for g, e in self._entries.items() if e.host == host and g not in listed]
            for gid in gone:
                del self._entries[gid]
            self.changes += bool(gone)
        for gid in frame.removed if booked == roster_hosts.DELTA else ():
            entry = self._entries.get(gid)
            if entry is not None and entry.host == host:
                del self._entries[gid]
                self.changes += 1
        for item in items if booked != roster_hosts.STALE else ():
            self._item_heard(host, item, frame, now)
        for entry in self._entries.values():
            if entry.host == host:
                entry.last_seen, entry.interval = now, frame.interval
        previous = self._gateways.get(host)
        self._gateways[host] = GatewayEntry(
            host,
            frame.version,
            now,
            frame.interval,
            sum(1 for e in self._entries.values() if e.host == host),
            frame.profiles if frame.full else (previous.profiles if previous else ()),
            frame.started if frame.full else (previous.started if previous else None),
        )

    def _owns(self, host: str, gid: str) -> bool:
        """May ``host`` announce ``gid`` (lock held)? Counts a refusal when not."""
        if gid == GATEWAY_KEY or (not gids.minted_on(gid, host) and self._owner(gid) not in (None, host)):
            self._refused[FOREIGN_GID] += 1
            return False
        if self.checking and not gids.minted_on(gid, host):
            self._legacy.setdefault(gid, host)
        return True

    def _item_heard(self, host: str, item: Any, frame: HostFrame, now: float) -> None:
        previous = self._entries.get(item.gid)
        fields = (item.label, item.role, host, item.status, item.backend, item.since, frame.version, item.channels)
        if previous is not None and fields == previous.announced():
            return
        label, role, _, status, backend, since, version, channels = fields
        self._entries[item.gid] = RosterEntry(
            item.gid, label, role, host, status, backend, since, version, now, frame.interval, channels
        )
        self._digests.pop(host, None)
        if previous is None or previous.status != status or previous.host != host:
            self.changes += 1

    def old_peers(self, within: float, now: float | None = None) -> list[str]:
        """Hosts whose gateway spoke only the per-entity protocol in the last ``within``
        seconds: while there are any, a new gateway sends per-entity frames too."""
        now = time.time() if now is None else now
        with self._lock:
            return self._hosts.old_peers(within, now)

    def hosts(self, now: float | None = None) -> list[dict[str, Any]]:
        """Per host: the protocol it speaks, the age of its last frame, whether the view is
        synced with it, its last sequence number and the gaps seen (``bridge roster``)."""
        now = time.time() if now is None else now
        with self._lock:
            return self._hosts.rows(now)

    def _entity_heard(self, host: str, gid: str, get: Any, now: float) -> None:
        label, role = _text(get("label"), "?"), _text(get("role"), "?")
        status, backend = _text(get("status"), "unknown"), _text(get("backend"), "?")
        since, version = _number(get("since") or now, now), _text(get("version"), "?")
        interval, channels = capped_interval(get("interval")), _channels(get("channels"))
        previous = self._entries.get(gid)
        announced = (label, role, host, status, backend, since, version, channels)
        if previous is not None and previous.announced() == announced:
            previous.last_seen, previous.interval = now, interval  # the common case: a refresh
            return
        self._digests.pop(host, None)
        self._entries[gid] = RosterEntry(
            gid, label, role, host, status, backend, since, version, now, interval, channels
        )
        if previous is None or (previous.status, previous.host, previous.channels) != (status, host, channels):
            self.changes += 1

    def expire(self, now: float | None = None) -> list[RosterEntry]:
        """Drop entries (and gateways) not heard from for ``expiry_missed`` intervals; nothing
        while expiry is held (:meth:`hold_expiry`)."""
        now = time.time() if now is None else now
        expired: list[RosterEntry] = []
        with self._lock:
            self._spawned = {g: until for g, until in self._spawned.items() if until > now}
            if now < self._held_until:
                return expired
            for gid, entry in list(self._entries.items()):
                if now - entry.last_seen > entry.interval * self.expiry_missed:
                    expired.append(self._entries.pop(gid))
            for host, gateway in list(self._gateways.items()):
                if now - gateway.last_seen > gateway.interval * self.expiry_missed:
                    del self._gateways[host]
            self._hosts.expire(now, self.expiry_missed)
            if expired:
                self.changes += 1
                self._digests.clear()
        return expired

    def hold_expiry(self, until: float) -> None:
        """Expire nothing before ``until`` (wall clock): silence this view could not hear (its
        listener down, its relay late) says nothing about a host."""
        with self._lock:
            self._held_until = max(self._held_until, until)

    def add_if_absent(self, entry: RosterEntry) -> bool:
        """Add an entity we learnt of before its first heartbeat (a spawn answer); a
        heartbeat that came first wins. It then refreshes and expires like any entry."""
        with self._lock:
            if entry.gid in self._entries:
                return False
            self._entries[entry.gid] = entry
            self._spawned[entry.gid] = entry.last_seen + 2 * entry.interval
            self._digests.pop(entry.host, None)
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
            self._digests.clear()


def _oversized(frame: dict[str, Any]) -> bool:
    """Was a host frame refused for carrying too many entities (not for being malformed)?"""
    listed = [frame.get(name) for name in ("entities", "changed", "removed")]
    return sum(len(value) for value in listed if isinstance(value, list)) > MAX_HOST_ENTITIES
