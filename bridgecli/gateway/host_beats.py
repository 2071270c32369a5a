"""What a gateway's host frames say (docs/protocol.md#4-presence-frames-bridgeroster): a full frame first, every
:data:`~bridgecli.roster_frames.FULL_EVERY` frames and on demand, deltas in between; and the
sync answers owed to joining gateways, each after a random jitter (docs/roster.md).

Thread-safe and without I/O: presence publishes what this builds.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from bridgecli import roster_frames

#: most sync answers waiting at once (a flood of joins is answered only in part: the joiners
#: still fill their views from the next broadcast frames)
MAX_PENDING_ANSWERS = 4096


class HostBeats:
    """This host's frame sequence. ``frame(items, …)`` gives the next broadcast frame (full or
    delta against the last one sent); ``answer(…)`` a full frame for one joiner, under the
    current sequence number so that the next broadcast delta follows it without a gap."""

    def __init__(self, host: str, version: str, interval: float, full_every: int = roster_frames.FULL_EVERY) -> None:
        self.host = host
        self.version = version
        self.interval = interval
        self.full_every = max(1, full_every)
        self.seq = -1
        self._sent: dict[str, dict[str, Any]] = {}
        self._since_full = 0
        self._full_due = True
        self._lock = threading.Lock()
        #: (due on the monotonic clock, requesting host, its reply key)
        self._answers: list[tuple[float, str, str]] = []

    def want_full(self) -> None:
        """Make the next broadcast frame a full one (after a reconnect: frames may have been lost)."""
        with self._lock:
            self._full_due = True

    def frame(self, items: list[dict[str, Any]], profiles: Any = (), started: float | None = None) -> bytes:
        """The next broadcast frame for the host's entities ``items`` (entity_item dicts)."""
        with self._lock:
            current = {item["gid"]: item for item in items}
            full = self._full_due or self._since_full >= self.full_every - 1
            self.seq += 1
            if full:
                self._full_due, self._since_full = False, 0
                changed, removed = list(current.values()), []
            else:
                self._since_full += 1
                changed = [item for gid, item in current.items() if self._sent.get(gid) != item]
                removed = [gid for gid in self._sent if gid not in current]
            self._sent = current
            return self._encode(full, changed, removed, len(current), profiles, started, self.seq)

    def answer(self, items: list[dict[str, Any]], profiles: Any = (), started: float | None = None) -> bytes:
        """A full frame for a joiner; it changes nothing in the broadcast sequence."""
        with self._lock:
            return self._encode(True, items, [], len(items), profiles, started, max(self.seq, 0))

    def _encode(self, full: bool, items: Any, removed: Any, count: int, profiles: Any, started: Any, seq: int) -> bytes:
        return roster_frames.host_frame(
            host=self.host,
            version=self.version,
            interval=self.interval,
            seq=seq,
            full=full,
            items=items,
            removed=removed,
            count=count,
            profiles=profiles,
            started=started,
        )

    # sync answers ----------------------------------------------------------------------------

    def owe(self, host: str, reply: str, now: float | None = None) -> bool:
        """Owe ``host`` a full frame on ``reply`` within interval/2 (jittered, so that a join
        does not make every host answer in the same instant); one at a time per host."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if len(self._answers) >= MAX_PENDING_ANSWERS or any(h == host for _, h, _ in self._answers):
                return False
            self._answers.append((now + random.uniform(0, self.interval / 2), host, reply))
            return True

    def due_answers(self, now: float | None = None) -> list[str]:
        """The reply keys whose answer is due now (each given once)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            due = [reply for at, _, reply in self._answers if at <= now]
            self._answers = [a for a in self._answers if a[0] > now]
            return due
