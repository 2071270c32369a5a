"""Threads for local requests that may wait (a ``poll --wait``, a registration), one per
request in progress, kept a while for the next one. Why not a fixed pool: a request may wait
for a day, and a hundred waiting agents must not hold up the hundred-and-first."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from bridgecli.gateway import log as glog

logger = logging.getLogger("bridgecli.gateway")
#: an idle thread ends after this many seconds without work
IDLE_FOR = 60.0


class Workers:
    """Runs each submitted call on a thread of its own, reusing idle threads."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, work: Callable[[], None]) -> None:
        """Run ``work`` on a worker thread (its exceptions are logged)."""
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # an idle thread takes it
        self._work.put(work)
        if start:
            threading.Thread(target=self._serve, name="local-api", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                work = self._work.get(timeout=IDLE_FOR)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # nobody counts on this one
                        self._idle -= 1
                        return
                continue
            try:
                work()
            except Exception as exc:
                glog.event(logger, "local API worker failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")
            with self._lock:
                self._idle += 1
