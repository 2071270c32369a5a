"""Everything the page shows except traffic, rebuilt on one thread every half second from the
local gateway's socket (with the receipts of messages sent from here and the channels), the
roster, ``bridge.dlq`` and the browser broker."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from bridgecli.config import Config
from bridgecli.dashboard import channel_view, receipt_view
from bridgecli.dashboard.feed import BrokerFeed
from bridgecli.dashboard.fleet import FleetTracker
from bridgecli.dashboard.metrics import DashboardMetrics
from bridgecli.errors import BridgeError, Rejected

logger = logging.getLogger("bridgecli.dashboard")
#: seconds between ``bridge.dlq`` peeks when no gateway reports the queue's depth
DLQ_PEEK_EVERY = 3.0
DLQ_LIMIT = 200
#: the newest receipt records asked of the gateway each round (the page draws fewer rows)
RECEIPTS_LIMIT = 200


def gateway_view(socket_path: str | None = None, lacking: dict[str, int] | None = None) -> dict[str, Any] | None:
    """The local gateway's ``status`` and ``roster``, for each entity with held messages the
    count and the oldest's arrival time, its ``receipts`` and its ``channel_list`` answers
    (each None from a gateway without the operation, and unasked of the one whose pid
    ``lacking`` maps the operation to); None when no gateway listens."""
    from bridgecli.gateway.client import GatewayClient

    client = GatewayClient.connect(socket_path, timeout=1.0)
    if client is None:
        return None
    lacking = lacking or {}
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
        optional: dict[str, dict[str, Any] | None] = {}
        for op, fields in (("receipts", {"limit": RECEIPTS_LIMIT}), ("channel_list", {})):
            optional[op] = None
            if op not in lacking or lacking[op] != status.get("pid"):
                try:
                    optional[op] = client.call(op, timeout=5, **fields)
                except Rejected:  # an older gateway: the view goes without it
                    optional[op] = None
    return {
        "status": status,
        "roster": roster,
        "held": held,
        "receipts": optional["receipts"],
        "channels": optional["channel_list"],
    }


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
    never changed in place, whenever a message's state moved on. ``metrics`` counts the
    thread's rounds and failed ones."""

    def __init__(
        self,
        config: Config,
        feed: BrokerFeed,
        dead_letters: DeadLetterView,
        browser: Callable[[], dict[str, Any]] | None = None,
        period: float = 0.5,
        metrics: DashboardMetrics | None = None,
    ) -> None:
        self.metrics = metrics or DashboardMetrics()
        self.config = config
        self.feed = feed
        self.dead_letters = dead_letters
        self.browser = browser
        self.period = period
        self.fleet = FleetTracker()
        self.snapshot: dict[str, Any] = {}
        self.version = 0
        self.receipts: dict[str, dict[str, Any]] = {}
        #: operation -> the pid of a gateway without it (a restarted one has another pid)
        self._lacking: dict[str, int] = {}
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
        """One round: rebuild :attr:`snapshot`; counted in :attr:`metrics`, failed if it raises."""
        try:
            self._collect()
        except Exception:
            self.metrics.collected(False)
            raise
        self.metrics.collected(True)

    def _collect(self) -> None:
        now = time.time()
        missing: list[str] = []
        try:
            local = gateway_view(lacking=self._lacking)
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
            self._note_lacking("channel_list", local, "channels")
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
            "channels": channel_view.channels(local["channels"] if local else None),
            "browser": self.browser() if self.browser else None,
            "broker": broker,
            "missing": missing,
        }
        if snapshot != self.snapshot:
            self.snapshot = snapshot
            self.version += 1

    def _take_receipts(self, local: dict[str, Any]) -> None:
        """Keep the cells of the gateway's newest records."""
        tracked = local["receipts"]
        if not self._note_lacking("receipts", local, "receipts"):
            return
        cells = receipt_view.cells(tracked.get("records") or [])
        if cells != self.receipts:
            self.receipts = cells

    def _note_lacking(self, op: str, local: dict[str, Any], key: str) -> bool:
        """True when ``local`` has the answer to ``op``; otherwise remember that this gateway
        lacks the operation, so it is not asked again every round."""
        pid = local["status"].get("pid")
        if local[key] is not None:
            self._lacking.pop(op, None)
            return True
        if isinstance(pid, int) and self._lacking.get(op) != pid:
            self._lacking[op] = pid
            logger.info("the local gateway has no %s operation: the page goes without it", op)
        return False
