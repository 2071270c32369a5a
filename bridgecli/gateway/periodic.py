"""The gateway's periodic tasks (roster heartbeats, expiry, retries), run between two steps of
its loop. Why a module of its own: the schedule is state of its own, and a failing task must
never end the loop."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from bridgecli.amqp import connection as amqp_conn
from bridgecli.gateway import log as glog

logger = logging.getLogger("bridgecli.gateway")


class Periodic:
    """Tasks by interval; :meth:`run_due` runs each one whose interval has passed."""

    def __init__(self) -> None:
        self._tasks: list[tuple[float, Callable[[], None]]] = []
        self._last_run: dict[int, float] = {}

    def add(self, interval: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` every ``interval`` seconds, the first time at the next :meth:`run_due`."""
        self._tasks.append((interval, fn))

    def run_due(self) -> None:
        """Run the tasks that are due; a failure is logged (a lost connection is raised)."""
        now = time.monotonic()
        for index, (interval, fn) in enumerate(self._tasks):
            if now - self._last_run.get(index, 0.0) >= interval:
                self._last_run[index] = now
                try:
                    fn()
                except amqp_conn.CONNECTION_ERRORS:
                    raise
                except Exception as exc:
                    glog.event(
                        logger,
                        "periodic task failed",
                        logging.WARNING,
                        task=getattr(fn, "__name__", "?"),
                        error=f"{type(exc).__name__}: {exc}",
                    )
