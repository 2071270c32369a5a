"""Everything the page shows except traffic, rebuilt on one thread every half second from the
local gateway's socket (with the receipts of messages sent from here), the roster,
``bridge.dlq`` and the browser broker."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from bridgecli.config import Config
from bridgecli.dashboard import receipt_view
from bridgecli.dashboard.feed import BrokerFeed
from bridgecli.dashboard.fleet import FleetTracker
from bridgecli.errors import BridgeError, Rejected

logger = logging.getLogger("bridgecli.dashboard")
#: seconds between ``bridge.dlq`` peeks when no gateway reports the queue's depth
DLQ_PEEK_EVERY = 3.0
DLQ_LIMIT = 200
#: the newest receipt records asked of the gateway each round (the page draws fewer rows)
RECEIPTS_LIMIT = 200


def gateway_view(socket_path: str | None = None, skip_receipts_of: int | None = None) -> dict[str, Any] | None:
    """The local gateway's ``status`` and ``roster``, for each entity with held messages the
    count and the oldest's arrival time, and its ``receipts`` answer (None from a gateway
    without the operation, and unasked of the one whose pid is ``skip_receipts_of``); None
    when no gateway listens."""
    from bridgecli.gateway.client import GatewayClient

    client = GatewayClient.connect(socket_path, timeout=1.0)
    if client is None:
        return None
    with client:
        status = client.call("status", timeout=5)
        roster = client.call("roster", timeout=5)
        held = []
        for entity in status["entities"]:
            if entity.get("held"):
                answer = client.call("held", gid=entity["gid"], timeout=5)
                held.append(
                    {
                        "gid": entity["gid"],
                        "label": entity["label"],
                        "role": entity["role"],
                        "held": answer["held"],
                        "oldest": answer["oldest"],
                    }
                )
        tracked = None
        if status.get("pid") != skip_receipts_of:
            try:
                tracked = client.call("receipts", limit=RECEIPTS_LIMIT, timeout=5)
            except Rejected:  # a gateway older than receipts: the view goes without them
                tracked = None
    return {"status": status, "roster": roster, "held": held, "receipts": tracked}


class DeadLetterView:
    """``bridge.dlq`` as rows, through the same operations as ``bridge dlq``; peeked again
    when the gateway's depth changes, after an operation, or every few seconds without one."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.rows: list[dict[str, Any]] = []
        self.error: str | None = None
        self._peeked_at = 0.0
        self._depth: int | None = None
        self._lock = threading.Lock()

    def refresh(self, depth: int | None) -> None:
        due = time.monotonic() - self._peeked_at > (30.0 if depth is not None else DLQ_PEEK_EVERY)
        if not due and depth == self._depth:
            return
        from bridgecli import dead_letter_queue

        with self._lock:
            try:
                self.rows, self.error = dead_letter_queue.peek(self.config, DLQ_LIMIT), None
            except BridgeError as exc:
                self.error = str(exc)
            self._peeked_at, self._depth = time.monotonic(), depth

    def retry(self, ids: list[str] | None) -> list[str]:
        from bridgecli import dead_letter_queue

        with self._lock:
            try:
                return dead_letter_queue.retry(self.config, None if ids is None else set(ids))
            finally:
                self._peeked_at = 0.0

    def purge(self) -> int:
        from bridgecli import dead_letter_queue

        with self._lock:
            try:
                return dead_letter_queue.purge(self.config)
            finally:
                self._peeked_at = 0.0


class Collector:
    """Builds :attr:`snapshot` (a JSON-able dict) every ``period`` seconds on its own thread;
    ``version`` grows whenever it changed, so the event stream sends it only then.
    :attr:`receipts` (msgId -> :func:`~bridgecli.dashboard.receipt_view.cell`) is replaced,
    never changed in place, whenever a message's state moved on."""

    def __init__(
        self,
        config: Config,
        feed: BrokerFeed,
        dead_letters: DeadLetterView,
        browser: Callable[[], dict[str, Any]] | None = None,
        period: float = 0.5,
    ) -> None:
        self.config = config
        self.feed = feed
        self.dead_letters = dead_letters
        self.browser = browser
        self.period = period
        self.fleet = FleetTracker()
        self.snapshot: dict[str, Any] = {}
        self.version = 0
        self.receipts: dict[str, dict[str, Any]] = {}
        self._no_receipts_op: int | None = None  # the pid of a gateway that lacks the operation
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dashboard-collector", daemon=True)

    def start(self) -> Collector:
        self.collect()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(10)

    def poke(self) -> None:
        """Collect again now (after a retry or purge)."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.period)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.collect()
            except Exception:  # one bad round must not freeze the page
                logger.exception("dashboard collection failed")

    def collect(self) -> None:
        now = time.time()
        missing: list[str] = []
        try:
            local = gateway_view(skip_receipts_of=self._no_receipts_op)
        except BridgeError as exc:
            local, missing = None, [f"the local gateway did not answer ({exc})"]
        if local is None:
            if not missing:
                missing.append(
                    "no local gateway on this host: held messages and this host's status are not "
                    "shown; the fleet comes from roster heartbeats — start `bridge gateway` to see them"
                )
            gateways = [g.__dict__ for g in self.feed.roster.gateways()]
            entries = [e.as_dict() for e in self.feed.roster.entries()]
        else:
            gateways, entries = local["roster"]["gateways"], local["roster"]["entries"]
            # the gateway heard the whole fleet long before our own listener: it tells the
            # feed which host each gid is on (for the rates) from the first second
            self.feed.roster.load(entries)
            self._take_receipts(local)
        broker = {"connected": self.feed.connected, "error": self.feed.error}  # read once: the feed moves on
        if not broker["connected"]:
            missing.append(
                f"no broker connection ({broker['error'] or 'connecting'}): traffic, the roster "
                "and dead letters are not live — check `bridge doctor`"
            )
        elif self.feed.dead_letter_error:
            missing.append(f"dead-letter rates are not shown: {self.feed.dead_letter_error}")
        self.dead_letters.refresh(local["status"].get("dlq_depth") if local else None)
        snapshot = {
            "host": self.config.values.get("host.id"),
            "fleet": self.fleet.update(gateways, entries, local["status"] if local else None, now),
            "held": local["held"] if local else None,
            "deadLetters": {"rows": self.dead_letters.rows, "error": self.dead_letters.error},
            "browser": self.browser() if self.browser else None,
            "broker": broker,
            "missing": missing,
        }
        if snapshot != self.snapshot:
            self.snapshot = snapshot
            self.version += 1

    def _take_receipts(self, local: dict[str, Any]) -> None:
        """Keep the cells of the gateway's newest records; remember a gateway without the
        operation so it is not asked again every round (a restarted one has another pid)."""
        tracked = local["receipts"]
        pid = local["status"].get("pid")
        if tracked is None:
            if pid != self._no_receipts_op:
                self._no_receipts_op = pid
                logger.info("the local gateway has no receipts operation: the traffic view shows no states")
            return
        self._no_receipts_op = None
        cells = receipt_view.cells(tracked.get("records") or [])
        if cells != self.receipts:
            self.receipts = cells
