"""What a roster relay decides, without I/O (docs/roster.md#the-roster-relay).

:class:`RelayCore` judges every delivery of ``bridge.roster.relay`` with its own
:class:`~bridgecli.roster.RosterView` (the gateways' identity policy), and says what to publish:
each second one relay frame (:meth:`RelayCore.tick`) with the per-entity and ``gone`` frames as
they came, then the full frames of hosts whose digest changed, one alive row per host heard since
the last frame and the refusal counts; and the answers owed to ``sync`` requests (:meth:`RelayCore.due_answers`).
The service (:mod:`bridgecli.relay.service`) publishes them.
"""

from __future__ import annotations

import json
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bridgecli import relay_frames
from bridgecli.relay_frames import ANSWER_CHUNK_BYTES, MAX_RELAY_FRAMES, RELAY_EVERY, AliveRow
from bridgecli.roster import GatewayEntry, RosterEntry, RosterView
from bridgecli.roster_frames import GATEWAY_KEY

if TYPE_CHECKING:
    from bridgecli.gateway.identity import IdentityPolicy

#: a relay that started or took over forwards no host it never had a digest of for this long
#: (2 × the default full-frame period of 6 s): the gateways ask for what they lack by digest
COLD_SECONDS = 12.0
#: a relay is active (it publishes) while it had a delivery in the last this many seconds
ACTIVE_SECONDS = 10.0
#: a whole-view answer is built at most this often and shared by every joiner meanwhile
WHOLE_VIEW_REUSE = 1.0
#: answers wait a random 0..this many seconds (joins in one instant are spread)
ANSWER_JITTER = 0.2
#: most sync answers pending at once (one per requesting host)
MAX_PENDING = 4096
#: per-entity and gone frames larger than this are not forwarded (theirs are a few hundred bytes)
MAX_VERBATIM_BYTES = 64 << 10


def new_epoch_id() -> str:
    """A fresh relay epoch: 12 random hex characters."""
    return secrets.token_hex(6)


@dataclass
class _Pending:
    due: float
    reply: str
    hosts: list[str] | None


class RelayCore:
    """One relay's state. ``take`` every delivery; ``tick`` once per ``every`` seconds and
    publish what it returns on ``bridge.roster`` under ``relay.<name>``; publish each of
    ``due_answers`` on ``bridge.ctl`` under its reply key; ``new_epoch`` at each (re)connect.
    ``clock`` (default ``time.time``) is used wherever ``now`` is not given. Not thread-safe:
    one thread drives it."""

    def __init__(
        self,
        name: str,
        policy: IdentityPolicy | None,
        clock: Callable[[], float] = time.time,
        *,
        every: float = RELAY_EVERY,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        self.name = name
        self.clock = clock
        self.every = every
        self._jitter = jitter or (lambda: random.uniform(0, ANSWER_JITTER))
        self.view = RosterView(policy=policy, local_host=None, on_sync=self._sync_asked)
        self.epoch = new_epoch_id()
        self.seq = 0
        #: when the cold period began (start, take-over, reconnect)
        self.cold_from = clock()
        #: when the last delivery came (None: never since the last epoch)
        self.heard_at: float | None = None
        #: host -> the digest last recorded for it (forwarded, or learnt while cold)
        self._recorded: dict[str, str] = {}
        #: host -> its digest as of the last tick (None: not synced, or per-entity protocol)
        self._digests: dict[str, str | None] = {}
        #: hosts that had a frame since the last tick (their digest is computed again)
        self._dirty: set[str] = set()
        #: per-entity heartbeats and gone frames to forward, as they came
        self._verbatim: list[dict[str, Any]] = []
        self._pending: dict[str, _Pending] = {}
        #: the last whole-view answer: when it was built, and its frames
        self._whole: tuple[float, list[bytes]] | None = None
        self._now: float | None = None
        self.answers_sent = 0

    # input ------------------------------------------------------------------------------

    def take(self, method: Any, props: Any, body: bytes, now: float | None = None) -> bool:
        """Judge one delivery with the view; True when the view took it. Every delivery, taken
        or not, keeps the relay active."""
        now = self.clock() if now is None else now
        if self.heard_at is None or now - self.heard_at > ACTIVE_SECONDS:
            self.cold_from = now  # took over: a standby that is fed now starts cold
        self.heard_at = now
        self._now = now
        try:
            taken = self.view.apply_delivery(method, props, body, now)
        finally:
            self._now = None
        if taken:
            self._note(body)
        return taken

    def _note(self, body: bytes) -> None:
        """What kind of frame the view just took: a host frame marks its host for a new digest;
        per-entity and gone frames are kept to forward."""
        try:
            frame = json.loads(body)
            kind, host = frame["type"], str(frame["host"])
        except (ValueError, KeyError, TypeError, RecursionError):
            return
        if kind == "host":
            self._dirty.add(host)
        elif kind in ("heartbeat", "gone"):
            self._dirty.add(host)
            if len(body) <= MAX_VERBATIM_BYTES:
                self._verbatim.append(frame)
            if kind == "gone" and frame.get("gid") == GATEWAY_KEY:
                self._recorded.pop(host, None)  # back later, it is a new host

    def _sync_asked(self, host: str, reply: str, hosts: list[str] | None) -> None:
        """The view vetted a sync request of ``host``: owe it one answer (one pending per host)."""
        if host in self._pending or len(self._pending) >= MAX_PENDING:
            return
        now = self._now if self._now is not None else self.clock()
        self._pending[host] = _Pending(now + self._jitter(), reply, hosts)

    def new_epoch(self, now: float | None = None) -> str:
        """A new epoch (each connect of the relay): gateways that see it send a full frame
        next; the relay starts cold again. Returns it."""
        self.epoch = new_epoch_id()
        self.cold_from = self.clock() if now is None else now
        self.heard_at = None
        self._whole = None
        return self.epoch

    # state ------------------------------------------------------------------------------

    def active(self, now: float | None = None) -> bool:
        """Had a delivery in the last :data:`ACTIVE_SECONDS` (a standby relay has none)."""
        now = self.clock() if now is None else now
        return self.heard_at is not None and now - self.heard_at <= ACTIVE_SECONDS

    def cold(self, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        return now - self.cold_from < COLD_SECONDS

    def digests(self) -> dict[str, str | None]:
        """Each heard host's digest as of the last tick (None: not synced / per-entity)."""
        return dict(self._digests)

    # output -----------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> list[bytes]:
        """Expire the view, then the relay frame(s) to publish now: none while not
        :meth:`active`; several when the forwarded frames exceed about 1 MB."""
        now = self.clock() if now is None else now
        for entry in self.view.expire(now):
            self._dirty.add(entry.host)
        rows = self.view.hosts(now)
        heard = {row["host"] for row in rows}
        for host in [h for h in self._digests if h not in heard]:
            del self._digests[host]
        for host in [h for h in self._recorded if h not in heard]:
            del self._recorded[host]
        heard_since = set(self._dirty)
        forwarded = self._changed_hosts(rows, now)
        verbatim, self._verbatim = self._verbatim, []
        if not self.active(now):
            return []
        # a row only for the hosts heard since the last tick (about once per host interval):
        # a row for every host every second would grow each frame with G, bytes with G²
        alive = [
            AliveRow(row["host"], row["seq"], self._digests.get(row["host"]), row["interval"])
            for row in rows
            if row["host"] in heard_since
        ]
        # verbatim first: a rebuilt full frame is the view after every frame of the tick, so a
        # gone frame behind it would drop a host that stopped and started again within it
        return self._relay_frames(verbatim + forwarded, alive, self.view.refused_frames())

    def _changed_hosts(self, rows: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        """New digests of the dirty hosts; the full frames of those whose digest changed since
        the one recorded (a host never recorded only once warm)."""
        dirty, self._dirty = self._dirty, set()
        if not dirty:
            return []
        parts = self._parts(dirty)
        cold = self.cold(now)
        forwarded = []
        for row in rows:
            host = row["host"]
            if host not in dirty:
                continue
            entries, gateway = parts.get(host, ([], None))
            digest = _digest(entries, gateway) if self._synced(row) and gateway is not None else None
            self._digests[host] = digest
            if digest is None or self._recorded.get(host) == digest:
                continue
            known = host in self._recorded
            self._recorded[host] = digest
            if known or not cold:
                assert gateway is not None
                forwarded.append(_full(host, entries, gateway, row))
        return forwarded

    def _parts(self, hosts: set[str]) -> dict[str, tuple[list[RosterEntry], GatewayEntry | None]]:
        gateways = {g.host: g for g in self.view.gateways() if g.host in hosts}
        return {host: (self.view.entries(host), gateways.get(host)) for host in hosts}

    @staticmethod
    def _synced(row: dict[str, Any]) -> bool:
        return row.get("protocol") == 2 and bool(row.get("synced"))

    def _relay_frames(
        self, frames: list[dict[str, Any]], alive: list[AliveRow], refused: dict[str, int]
    ) -> list[bytes]:
        out = []
        for i, part in enumerate(_chunks(frames)):
            self.seq += 1
            out.append(
                relay_frames.relay_frame(
                    relay=self.name,
                    epoch=self.epoch,
                    seq=self.seq,
                    frames=part,
                    alive=alive if i == 0 else (),
                    refused=refused if i == 0 else None,
                    interval=self.every,
                )
            )
        return out

    def due_answers(self, now: float | None = None) -> list[tuple[str, list[bytes]]]:
        """(reply key, relay answer frames) for each sync request whose jitter has passed: the
        full frames of the asked hosts the relay is synced with (all of them for a whole-view
        request; that one is built at most once a second and shared)."""
        now = self.clock() if now is None else now
        due = [(host, p) for host, p in self._pending.items() if p.due <= now]
        if not due:
            return []
        out = []
        for host, pending in due:
            del self._pending[host]
            out.append(
                (pending.reply, self._whole_view(now) if pending.hosts is None else self._answer(pending.hosts, now))
            )
            self.answers_sent += 1
        return out

    def _answer(self, hosts: list[str] | None, now: float) -> list[bytes]:
        frames = self._host_frames(hosts, now)
        return relay_frames.answer_frames(relay=self.name, epoch=self.epoch, seq=self.seq, frames=frames)

    def _whole_view(self, now: float) -> list[bytes]:
        if self._whole is not None and 0 <= now - self._whole[0] < WHOLE_VIEW_REUSE:
            return self._whole[1]
        answer = self._answer(None, now)
        self._whole = (now, answer)
        return answer

    def _host_frames(self, hosts: list[str] | None, now: float) -> list[dict[str, Any]]:
        rows = [r for r in self.view.hosts(now) if self._synced(r) and (hosts is None or r["host"] in hosts)]
        if not rows:
            return []
        parts = self._parts({r["host"] for r in rows})
        frames = []
        for row in rows:
            entries, gateway = parts[row["host"]]
            if gateway is not None:
                frames.append(_full(row["host"], entries, gateway, row))
        return frames


def _digest(entries: list[RosterEntry], gateway: GatewayEntry) -> str:
    return relay_frames.host_digest(entries, gateway.version, gateway.profiles, gateway.started)


def _full(host: str, entries: list[RosterEntry], gateway: GatewayEntry, row: dict[str, Any]) -> dict[str, Any]:
    return relay_frames.full_host_frame(
        host,
        entries,
        seq=max(int(row.get("seq", 0)), 0),
        version=gateway.version,
        interval=gateway.interval,
        profiles=gateway.profiles,
        started=gateway.started,
    )


def _chunks(frames: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``frames`` cut into parts of about :data:`ANSWER_CHUNK_BYTES` (at least one part)."""
    parts: list[list[dict[str, Any]]] = [[]]
    size = 0
    for frame in frames:
        length = len(json.dumps(frame, separators=(",", ":")))
        if parts[-1] and (size + length > ANSWER_CHUNK_BYTES or len(parts[-1]) >= MAX_RELAY_FRAMES):
            parts.append([])
            size = 0
        parts[-1].append(frame)
        size += length
    return parts
