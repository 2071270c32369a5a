"""A roster view's relay feed (docs/roster.md#the-roster-relay): relay frames taken into a
:class:`~bridgecli.roster.RosterView`, the hosts whose digests disagree, the relay's state,
and the per-sender flood budget every other frame passes first.

A relay frame counts only when it came through ``bridge.roster`` under ``relay.<name>`` (its
body naming the same relay) or on our own reply key as an answer, never dead-lettered, and
under the sender check only from :data:`~bridgecli.relay_frames.RELAY_USER` or a trusted
user. Each frame it forwards is judged again as if it came under its own host's key. Pure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bridgecli import relay_frames
from bridgecli.relay_frames import MAX_RELAY_BYTES, AliveRow, RelayFrame, parse_relay_frame, relay_name_of
from bridgecli.roster_entries import KEY_MISMATCH, TOO_LARGE, USER_MISMATCH

#: the flood budget: frames a second per sender, and the burst it may spend at once
FLOOD_RATE = 200.0
FLOOD_BURST = 1000.0
#: most senders the budget tracks; past it, those with a full bucket are forgotten
MAX_SENDERS = 10_000


class RelayedView(Protocol):
    """What the feed needs of its view (a :class:`~bridgecli.roster.RosterView`)."""

    policy: Any

    def refuse(self, reason: str) -> bool: ...

    def apply_forwarded(self, frame: dict[str, Any], now: float, answer: bool) -> bool: ...

    def alive_rows(self, rows: list[AliveRow], now: float) -> list[str]: ...


class FloodBudget:
    """A token bucket per sender (its broker user, or the key's host without one): a frame
    past :data:`FLOOD_RATE` a second, after a burst of :data:`FLOOD_BURST`, is refused before
    it is decoded, so no host can make every view spend its CPU on its frames."""

    def __init__(self, rate: float = FLOOD_RATE, burst: float = FLOOD_BURST) -> None:
        self.rate, self.burst = rate, burst
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def spend(self, sender: str, now: float) -> bool:
        """Take one frame from ``sender``'s budget; False when it is spent."""
        with self._lock:
            tokens, at = self._buckets.get(sender, (self.burst, now))
            tokens = min(self.burst, tokens + max(0.0, now - at) * self.rate)
            if len(self._buckets) >= MAX_SENDERS and sender not in self._buckets:
                self._forget_full(now)
            if tokens < 1.0:
                self._buckets[sender] = (tokens, now)
                return False
            self._buckets[sender] = (tokens - 1.0, now)
            return True

    def _forget_full(self, now: float) -> None:
        for name, (tokens, at) in list(self._buckets.items()):
            if tokens + (now - at) * self.rate >= self.burst:
                del self._buckets[name]


@dataclass
class RelayState:
    """The relay this view last heard: its name, epoch, interval, when its last frame came
    (``heard_at``, wall clock; None: never) and the refusal counts it reports."""

    relay: str | None = None
    epoch: str | None = None
    interval: float = relay_frames.RELAY_EVERY
    heard_at: float | None = None
    refused: dict[str, int] = field(default_factory=dict)


class RelayFeed:
    """What a view takes from relays. ``on_epoch(relay, epoch)`` runs (outside the view's
    lock) when a relay with a new name or epoch is heard; ``fed`` says whether the owner hears
    other hosts through the relay (presence sets it) rather than directly."""

    def __init__(self, view: RelayedView, on_epoch: Callable[[str, str], None] | None = None) -> None:
        self.view = view
        self.on_epoch = on_epoch
        self.state = RelayState()
        self.fed = False
        self._wanted: set[str] = set()
        self._lock = threading.Lock()

    def deliver(self, answer: bool, key: str, user_id: str | None, body: bytes, now: float) -> bool:
        """A relay frame as delivered: broadcast under ``key`` (``relay.<name>``), or an
        ``answer`` on our own reply key (the view checked the key); refusals are counted."""
        if not relay_user_ok(self.view.policy, user_id):
            return self.view.refuse(USER_MISMATCH)
        if len(body) > MAX_RELAY_BYTES:
            return self.view.refuse(TOO_LARGE)
        frame = parse_relay_frame(body)
        if frame is None:
            return False
        if not answer and relay_name_of(key) != frame.relay:
            return self.view.refuse(KEY_MISMATCH)
        frame.answer = answer
        return self.take(frame, now)

    def take(self, frame: RelayFrame, now: float | None = None) -> bool:
        """Apply a relay frame whose arrival was vetted: its forwarded frames as their hosts'
        own, then its alive rows (each refreshes its host; a digest other than ours makes the
        host wanted). True when it was applied."""
        now = time.time() if now is None else now
        view = self.view
        for forwarded in frame.frames:
            view.apply_forwarded(forwarded, now, answer=frame.answer)
        if not frame.answer:
            wanted = view.alive_rows(frame.alive, now)
            with self._lock:
                self._wanted.update(wanted)
        else:
            with self._lock:
                self._wanted.difference_update(f.get("host") for f in frame.frames)
        with self._lock:
            state = self.state
            changed = (state.relay, state.epoch) != (frame.relay, frame.epoch)
            state.relay, state.epoch, state.heard_at = frame.relay, frame.epoch, now
            if not frame.answer:
                state.interval, state.refused = frame.interval, dict(frame.refused)
        if changed and self.on_epoch is not None:
            self.on_epoch(frame.relay, frame.epoch)
        return True

    def lag(self) -> float:
        """How long a change on another host may take to reach a view fed by this relay (two
        of its periods), 0 when the view hears every host directly: how long a lookup that
        finds nothing should wait before calling a target unknown."""
        return 2 * self.state.interval if self.fed else 0.0

    def take_wanted(self) -> list[str]:
        """The hosts whose digest disagreed since the last call (each given once)."""
        with self._lock:
            wanted, self._wanted = sorted(self._wanted), set()
        return wanted

    def late(self, now: float | None = None) -> bool:
        """No relay frame for over two of its intervals (or never one)."""
        now = time.time() if now is None else now
        heard = self.state.heard_at
        return heard is None or now - heard > 2 * self.state.interval

    def info(self, now: float | None = None) -> dict[str, Any]:
        """``{feed, relay, epoch, age, interval, refused}`` for ``bridge status`` and ``bridge
        roster``: feed is ``relay NAME`` or ``every host directly``."""
        now = time.time() if now is None else now
        with self._lock:
            state = self.state
            age = None if state.heard_at is None else round(max(0.0, now - state.heard_at), 3)
            feed = f"relay {state.relay or '(none heard yet)'}" if self.fed else "every host directly"
            return {
                "feed": feed,
                "relay": state.relay,
                "epoch": state.epoch,
                "age": age,
                "interval": state.interval,
                "refused": dict(state.refused),
            }


def relay_user_ok(policy: Any, user_id: str | None) -> bool:
    """May ``user_id`` publish relay frames? Anyone with the sender check off (``policy`` an
    IdentityPolicy or None); under it only the hub's relay user or a trusted user."""
    if policy is None or policy.mode == "off":
        return True
    return bool(user_id) and (user_id == relay_frames.RELAY_USER or user_id in policy.trusted_users)


def is_relay_body(body: bytes) -> bool:
    """Does ``body`` look like a relay frame (its type among its first bytes, as
    :func:`~bridgecli.relay_frames.relay_frame` writes it)? Cheap, before any decoding."""
    return b'"type":"relay"' in body[:64]
