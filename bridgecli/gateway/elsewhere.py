"""Queues of ours that another client consumes: noticed before consuming, retried with backoff.

Why: one consumer per inbox is what keeps two gateways sharing a registry (a cloned VM, a
restored snapshot, a home on NFS) from each delivering about half of the messages.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bridgecli.gateway import log as glog

logger = logging.getLogger("bridgecli.gateway")


@dataclass
class _Entry:
    what: str
    retry: Callable[[], None]
    interval: float = 1.0
    next_at: float = 0.0


class Elsewhere:
    """The queues consumed elsewhere, by name (I/O thread only). ``stale_grace``: how long
    after a lost connection its consumers may still be this gateway's own."""

    def __init__(self, stale_grace: float) -> None:
        self.stale_grace = stale_grace
        self._entries: dict[str, _Entry] = {}
        self._probe: Any = None
        #: when this gateway last lost its connection: until the broker notices, the old
        #: connection's consumers still count (a cluster node that died, a dead TCP peer)
        self._lost_at: float | None = None

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __contains__(self, queue: object) -> bool:
        return queue in self._entries

    def reset(self) -> None:
        """A new connection: forget the probe channel and every entry (attach checks again)."""
        self._probe, self._entries = None, {}

    def connection_lost(self) -> None:
        self._lost_at = time.monotonic()

    def forget(self, queue: str) -> None:
        self._entries.pop(queue, None)

    def check(self, connection: Any, queue: str, retry: Callable[[], None], what: str) -> bool:
        """True when another client consumes ``queue``. Then ``retry`` runs again later
        (:meth:`retry_due`), with backoff up to 30 s, until the queue is free; the first time
        is logged as a warning, the take-over as info."""
        if self._probe is None or not self._probe.is_open:
            self._probe = connection.sync_channel(30.0, "probe")
        consumers = self._probe.queue_declare(queue, passive=True).method.consumer_count
        entry = self._entries.get(queue)
        if not consumers:
            if entry is not None:
                del self._entries[queue]
                glog.event(logger, "queue is free again; serving it here", queue=queue, what=what)
            return False
        # just reconnected: the consumer may be this gateway's own, on the connection the
        # broker has not noticed is gone yet; look again every second meanwhile, rather than
        # backing off as from a stranger (a killed cluster node's consumers are not counted)
        own_leftover = self._lost_at is not None and time.monotonic() - self._lost_at < self.stale_grace
        if entry is None:
            entry = self._entries[queue] = _Entry(what, retry)
            if own_leftover:
                glog.event(
                    logger,
                    "queue still has this gateway's previous consumer; waiting for the broker to drop it",
                    queue=queue,
                    what=what,
                )
            else:
                glog.event(
                    logger,
                    "queue is consumed by another client; not serving it here until it goes away",
                    logging.WARNING,
                    queue=queue,
                    what=what,
                    hint="another gateway with a copy of this host's files? (a cloned VM, a restored "
                    "snapshot, a shared home directory): stop it",
                )
        elif not own_leftover:
            entry.interval = min(entry.interval * 2, 30.0)
        entry.next_at = time.monotonic() + entry.interval
        return True

    def retry_due(self) -> None:
        """Run the retry of every entry whose time has come (a periodic task)."""
        now = time.monotonic()
        for entry in [e for e in self._entries.values() if e.next_at <= now]:
            entry.retry()
