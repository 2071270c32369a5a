"""The gateway's writes to the receipt ledger, in order, on a thread of their own.

Recording a message before its publish, its confirm, and each receipt that arrives are queued
here by the loop thread and the API threads, and applied in the order queued, all that waits
in one transaction. Why: a write on the loop thread (an SQLite commit per message) lay on the
path of every delivery and every send; in order, because a local recipient's receipt may be
queued right after the record it fills. Readers call :meth:`LedgerWriter.settle` first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from bridgecli.envelope import Envelope
from bridgecli.gateway import log as glog
from bridgecli.gateway.gathering import GatheringWriter
from bridgecli.hoststate.ledger import Ledger
from bridgecli.receipts import Receipt

logger = logging.getLogger("bridgecli.gateway")


class LedgerWriter(GatheringWriter[tuple[str, Any]]):
    """Queues ledger changes and applies them on its thread; ``on_applied(receipt, outcome)``
    hears what became of each receipt (on that thread, after the commit)."""

    def __init__(self, ledger: Ledger, on_applied: Callable[[Receipt, str], None]) -> None:
        super().__init__("receipt-ledger")
        self.ledger = ledger
        self.on_applied = on_applied
        self.start()

    def track(self, envelopes: list[Envelope]) -> None:
        self._put([("track", envelopes)])

    def sent(self, msg_id: str, ok: bool) -> None:
        self._put([("sent" if ok else "forget", msg_id)])

    def apply(self, receipt: Receipt) -> None:
        self._put([("apply", receipt)])

    def _write(self, batch: list[tuple[str, Any]]) -> Callable[[], None] | None:
        applied: list[tuple[Receipt, str]] = []
        ledger = self.ledger
        try:
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
        except Exception as exc:  # a full disk: receipts are lost, never the gateway
            glog.event(logger, "receipt ledger write failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")
            return None

        def tell() -> None:
            for receipt, outcome in applied:
                self.on_applied(receipt, outcome)

        return tell
