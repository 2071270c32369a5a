"""Per-host freshness of a roster view: which protocol each host speaks, when its last frame
came, and, for hosts that send host frames, their sequence and whether the view is synced
with them (docs/roster.md). Not thread-safe: :class:`bridgecli.roster.RosterView` holds its
lock around every call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from bridgecli.roster_frames import HostFrame

#: what :meth:`HostStates.frame` tells the view to do with a host frame
FULL, DELTA, STALE = "full", "delta", "stale"


@dataclass
class HostState:
    """How fresh a host's part of the view is: when its last frame came, and for a host that
    sends host frames, the last sequence number and whether the view holds its whole truth
    (``synced``: a full frame and every delta since)."""

    host: str
    protocol: int
    last_frame: float
    interval: float
    seq: int = -1
    synced: bool = True
    gaps: int = 0
    #: when the last full frame came (None: never)
    full_at: float | None = None

    def as_dict(self, now: float) -> dict[str, Any]:
        row = asdict(self)
        row["age"] = round(max(0.0, now - self.last_frame), 3)
        return row


class HostStates:
    """The view's per-host bookkeeping."""

    def __init__(self, local_host: str | None) -> None:
        self.local_host = local_host
        self._hosts: dict[str, HostState] = {}
        #: host -> when its gateway last sent a ``_gateway`` heartbeat without the host-frame mark
        self._old: dict[str, float] = {}

    def heard_old(self, host: str, now: float, interval: float, unmarked_gateway: bool = False) -> None:
        """A per-entity protocol frame from ``host``: it keeps the host fresh; an unmarked
        ``_gateway`` heartbeat says its gateway speaks only that protocol."""
        state = self._hosts.get(host)
        if state is None:
            self._hosts[host] = HostState(host, 1, now, interval)
        else:
            state.last_frame = now
        if unmarked_gateway:
            self._old[host] = now

    def frame(self, frame: HostFrame, now: float, answer: bool) -> str:
        """Book a host frame: :data:`FULL` (replace the host's entries), :data:`DELTA` (apply
        on top; a gap in ``seq`` marks the host unsynced until the next full frame) or
        :data:`STALE` (a sync answer overtaken by a broadcast delta: only refresh)."""
        state = self._hosts.get(frame.host)
        if state is None or state.protocol != 2:
            state = self._hosts[frame.host] = HostState(frame.host, 2, now, frame.interval, synced=False)
        state.last_frame, state.interval = now, frame.interval
        if answer and state.synced and frame.seq < state.seq:
            return STALE
        if frame.full:
            state.synced, state.full_at, state.seq = True, now, frame.seq
            return FULL
        if not (state.synced and frame.seq == state.seq + 1):
            state.gaps += state.synced
            state.synced = False
        state.seq = frame.seq
        return DELTA

    def alive(self, host: str, now: float, interval: float) -> None:
        """A relay's alive row for ``host``: as fresh as a frame of its own would make it."""
        state = self._hosts.get(host)
        if state is not None:
            state.last_frame, state.interval = now, interval

    def drop(self, host: str) -> None:
        self._hosts.pop(host, None)
        self._old.pop(host, None)

    def expire(self, now: float, missed: int) -> None:
        for host, state in list(self._hosts.items()):
            if now - state.last_frame > state.interval * missed:
                self.drop(host)

    def old_peers(self, within: float, now: float) -> list[str]:
        return sorted(h for h, at in self._old.items() if now - at <= within and h != self.local_host)

    def rows(self, now: float) -> list[dict[str, Any]]:
        return [self._hosts[h].as_dict(now) for h in sorted(self._hosts)]
