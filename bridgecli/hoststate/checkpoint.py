"""Copying the store's WAL into its database from a thread of its own, when the gateway is idle,
instead of inside whichever commit crosses SQLite's 1,000-page mark.

Why: a checkpoint fsyncs the database, and on ext4 that fsync stalls the other writes of the
moment too; inside a delivery's commit it held a message for 10–20 ms every ~150 U1 round trips
(the round trip's p99 in bench/messaging.py). Waiting for a quiet moment (:data:`CHECKPOINT_IDLE`
without a write) keeps it off busy stretches; under sustained load the WAL is still checkpointed
once it reaches :data:`WAL_LIMIT`. A PASSIVE checkpoint never blocks writers.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

#: the gateway checkpoints the WAL after this long without a write (seconds) ...
CHECKPOINT_IDLE = 0.5
#: ... or once it has grown to this many bytes (also the size it is truncated back to)
WAL_LIMIT = 32 * 1024 * 1024


def leave_checkpoints_to_thread(db: sqlite3.Connection) -> None:
    """Stop ``db`` from checkpointing inside its own commits (the :class:`WalCheckpointer` does)."""
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")


class WalCheckpointer:
    """A daemon thread checkpointing the WAL of the database at ``path`` until :meth:`stop`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="store-checkpoint")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to finish and wait for it (briefly; not when called from it)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(5)

    def _loop(self) -> None:
        wal = f"{self.path}-wal"
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        seen, changed_at, copied = None, time.monotonic(), None
        try:
            while not self._stop.wait(CHECKPOINT_IDLE / 2):
                try:
                    st = os.stat(wal)
                except OSError:
                    continue
                now = time.monotonic()
                if st.st_mtime_ns != seen:
                    seen, changed_at = st.st_mtime_ns, now
                quiet = now - changed_at >= CHECKPOINT_IDLE and copied != seen
                if quiet or st.st_size >= WAL_LIMIT:
                    try:
                        db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                        copied = seen  # a checkpoint writes the database, not the WAL
                    except sqlite3.Error:
                        pass  # busy or locked: the next round copies it
        finally:
            db.close()
