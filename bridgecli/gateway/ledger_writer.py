"""The gateway's writes to the receipt ledger, in order, on a thread of their own.

Recording a message before its publish, its confirm, and each receipt that arrives are queued
here by the loop thread and the API threads, and applied in the order queued, all that waits
in one transaction. Why: a write on the loop thread (an SQLite commit per message) lay on the
path of every delivery and every send; in order, because a local recipient's receipt may be
queued right after the record it fills. Readers call :meth:`LedgerWriter.settle` first.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from bridgecli.envelope import Envelope
from bridgecli.gateway import log as glog
from bridgecli.hoststate.ledger import Ledger
from bridgecli.receipts import Receipt

logger = logging.getLogger("bridgecli.gateway")
#: how long the writer gathers changes before it writes them (seconds)
GATHER = 0.02


class LedgerWriter:
    """Queues ledger changes and applies them on its thread; ``on_applied(receipt, outcome)``
    hears what became of each receipt (on that thread, after the commit)."""

    def __init__(self, ledger: Ledger, on_applied: Callable[[Receipt, str], None]) -> None:
        self.ledger = ledger
        self.on_applied = on_applied
        self._ops: deque[tuple[str, Any]] = deque()
        self._cond = threading.Condition()
        self._queued = 0
        self._done = 0
        self._stopping = False
        #: readers waiting in :meth:`settle`: the writer then writes at once
        self._settling = 0
        self._thread = threading.Thread(target=self._run, name="receipt-ledger", daemon=True)
        self._thread.start()

    def track(self, envelopes: list[Envelope]) -> None:
        self._put("track", envelopes)

    def sent(self, msg_id: str, ok: bool) -> None:
        self._put("sent" if ok else "forget", msg_id)

    def apply(self, receipt: Receipt) -> None:
        self._put("apply", receipt)

    def _put(self, op: str, arg: Any) -> None:
        with self._cond:
            idle = not self._ops  # else the writer is gathering: no need to wake it again
            self._ops.append((op, arg))
            self._queued += 1
            if idle:
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
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._ops) or self._stopping)
                if not self._ops and self._stopping:
                    return
                # gather for a moment (unless a reader waits): one commit and one wake-up of
                # this thread for many changes, not one per message on a busy gateway
                self._cond.wait_for(lambda: self._stopping or self._settling > 0, GATHER)
                batch = list(self._ops)
                self._ops.clear()
            applied: list[tuple[Receipt, str]] = []
            try:
                self._write(batch, applied)
            except Exception as exc:  # a full disk: receipts are lost, never the gateway
                glog.event(logger, "receipt ledger write failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")
                applied = []
            with self._cond:
                self._done += len(batch)
                self._cond.notify_all()
            for receipt, outcome in applied:
                self.on_applied(receipt, outcome)

    def _write(self, batch: list[tuple[str, Any]], applied: list[tuple[Receipt, str]]) -> None:
        ledger = self.ledger
        with ledger.transaction():
            for op, arg in batch:
                if op == "track":
                    ledger.track(arg)
                elif op == "sent":
                    ledger.sent(arg)
                elif op == "forget":
                    ledger.forget([arg])
                else:
                    applied.append((arg, ledger.apply(arg)))
