"""Deadlines on a pika I/O loop that are mostly cancelled before they are due (a held wait's
timeout, a publish's confirm timeout), behind at most one pika timer.

Why: pika keeps a cancelled timer in its heap until it purges hundreds at once, and every timer
pushed or popped then pays Python-level comparisons against them. These deadlines are kept in a
heap of plain tuples instead, and only the earliest one is armed on the loop.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable
from typing import Any, Protocol


class TimerLoop(Protocol):
    """The part of pika's ``IOLoop`` a :class:`Deadlines` uses."""

    def call_later(self, delay: float, callback: Callable[[], None]) -> Any: ...

    def remove_timeout(self, timeout_handle: Any) -> None: ...


class Deadline:
    """One deadline's handle (:meth:`Deadlines.cancel`)."""

    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[], None]) -> None:
        #: None once cancelled or run
        self.callback: Callable[[], None] | None = callback


class Deadlines:
    """Callbacks to run on ``loop`` after a delay; the loop's thread only."""

    #: rebuild the heap once this many cancelled entries are in it, and they are half of it
    _PURGE_AT = 64

    def __init__(self, loop: TimerLoop) -> None:
        self._loop = loop
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._cancelled = 0
        #: the pika timer that runs :meth:`_due`, and when it is due
        self._armed: Any = None
        self._armed_at = math.inf

    def call_later(self, delay: float, callback: Callable[[], None]) -> Deadline:
        """Run ``callback`` on the loop ``delay`` seconds from now, unless cancelled first."""
        when = time.monotonic() + max(delay, 0.0)
        deadline = Deadline(callback)
        heapq.heappush(self._heap, (when, next(self._order), deadline))
        if when < self._armed_at:
            self._arm(when)
        return deadline

    def cancel(self, deadline: Deadline) -> None:
        """Let ``deadline`` go without running it (nothing when it ran or was cancelled)."""
        if deadline.callback is not None:
            deadline.callback = None
            self._cancelled += 1
            if self._cancelled >= self._PURGE_AT and self._cancelled * 2 >= len(self._heap):
                self._heap[:] = [entry for entry in self._heap if entry[2].callback is not None]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def __len__(self) -> int:
        """How many deadlines are pending."""
        return len(self._heap) - self._cancelled

    def _arm(self, when: float) -> None:
        if self._armed is not None:
            self._loop.remove_timeout(self._armed)
        self._armed = self._loop.call_later(max(when - time.monotonic(), 0.0), self._due)
        self._armed_at = when

    def _due(self) -> None:
        self._armed, self._armed_at = None, -math.inf  # what the callbacks add is armed below
        heap = self._heap
        try:
            while heap and heap[0][0] <= time.monotonic():
                deadline = heapq.heappop(heap)[2]
                callback = deadline.callback
                if callback is None:
                    self._cancelled -= 1
                    continue
                deadline.callback = None
                callback()
        finally:
            self._armed_at = math.inf
            while heap and heap[0][2].callback is None:
                heapq.heappop(heap)
                self._cancelled -= 1
            if heap:
                self._arm(heap[0][0])
