"""A writer thread that gathers: items queued from any thread, written in batches on a thread of
its own, one transaction per batch (the receipt ledger's and the message archive's writers).

Why: an SQLite commit per message on the loop thread lay on the path of every delivery and
every send; gathering for a moment turns many commits and wake-ups into one. Items are written
in the order queued; a reader that must see its own write calls :meth:`GatheringWriter.settle`,
which also ends the gathering at once.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
#: how long the writer gathers before it writes (seconds)
GATHER = 0.02


class GatheringWriter(Generic[T]):
    """Subclasses give :meth:`_write` (one batch; it must not raise) and may give :meth:`_job`
    (a side job the thread runs when :meth:`_ask_job` asked for it, e.g. pruning). With
    ``max_queued``, items past it are dropped and :meth:`_put` says how many."""

    def __init__(self, name: str, max_queued: int | None = None, gather: float = GATHER) -> None:
        self.max_queued = max_queued
        self.gather = gather
        self._items: deque[T] = deque()
        self._cond = threading.Condition()
        self._queued = 0
        self._done = 0
        self._job_due = False
        self._stopping = False
        #: readers waiting in :meth:`settle`: the writer then writes at once
        self._settling = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _put(self, items: list[T]) -> int:
        """Queue ``items`` (any thread; never waits); how many were dropped for lack of room."""
        dropped = 0
        with self._cond:
            if self.max_queued is not None:
                room = max(self.max_queued - len(self._items), 0)
                if len(items) > room:
                    dropped, items = len(items) - room, items[:room]
            if not items:
                return dropped
            idle = not self._items  # else the writer is gathering: no need to wake it again
            self._items.extend(items)
            self._queued += len(items)
            if idle:
                self._cond.notify_all()
        return dropped

    def _ask_job(self) -> None:
        with self._cond:
            self._job_due = True
            self._cond.notify_all()

    def settle(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued before this call is written (True), at most ``timeout``."""
        with self._cond:
            target = self._queued
            self._settling += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: self._done >= target, timeout)
            finally:
                self._settling -= 1

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.ident is not None:
            self._thread.join(timeout)

    def _write(self, batch: list[T]) -> Callable[[], None] | None:
        """Write ``batch``; what it returns runs once the batch counts as written (after
        :meth:`settle` returned for it)."""
        raise NotImplementedError

    def _job(self) -> None:
        """The side job :meth:`_ask_job` asks for."""

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._items) or self._job_due or self._stopping)
                if not self._items and self._stopping:
                    return
                if self._items:  # gather (unless a reader waits): one commit for many items
                    self._cond.wait_for(lambda: self._stopping or self._settling > 0, self.gather)
                batch = list(self._items)
                self._items.clear()
                job, self._job_due = self._job_due, False
            after = self._write(batch) if batch else None
            with self._cond:
                self._done += len(batch)
                self._cond.notify_all()
            if after is not None:
                after()
            if job:
                self._job()
