"""An open write transaction of the host store, passed explicitly to the writes that join it.

Why a module of its own: the gateway's burst and the store both hold it; it is the one piece of
the store's API that outlives a single call.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable


class Transaction:
    """An open write transaction of :meth:`Store.begin`: pass it to the store's writes to join
    them, then :meth:`commit` or :meth:`rollback` it once (later calls do nothing). Why an
    object: whoever holds it decides where a write goes; no thread-wide mode does."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.open = True
        self._after: list[Callable[[], None]] = []

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once this transaction has committed; never after a rollback."""
        self._after.append(fn)

    def commit(self) -> None:
        """Commit; if that fails, the transaction is rolled back (and the error raised)."""
        if not self.open:
            return
        self.open = False
        try:
            self.db.execute("COMMIT")
        except Exception:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        for fn in self._after:
            fn()

    def rollback(self) -> None:
        if self.open:
            self.open = False
            self.db.execute("ROLLBACK")
