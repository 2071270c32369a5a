"""The sender's record of its messages' lives: ``receipts.db`` next to the message store.

One row per message a local entity sent through the gateway: when the broker confirmed it,
when and how it was delivered and read, or why it was dead-lettered. A receipt only fills a
state the row does not have yet, for the recipient the row names; anything else is a
duplicate, or about a message this host never sent. A file of its own: its writes never wait
behind a delivery burst's transaction in the message store. Rows older than
``receipts.keep`` are pruned.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bridgecli.envelope import Envelope
from bridgecli.receipts import DEAD, DELIVERED, READ, SENT, Receipt

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tracked (
    msg_id TEXT PRIMARY KEY,
    recipient TEXT NOT NULL,
    sender TEXT NOT NULL,
    kind TEXT NOT NULL,
    created REAL NOT NULL,
    sent_at REAL,
    delivered_at REAL, delivered_how TEXT, delivered_ref TEXT,
    read_at REAL, read_how TEXT, read_ref TEXT,
    dead_at REAL, dead_reason TEXT
);
CREATE INDEX IF NOT EXISTS tracked_created ON tracked (created);
"""
_COLUMN = {DELIVERED: "delivered", READ: "read", DEAD: "dead"}

#: what :meth:`Ledger.apply` found
RECORDED, DUPLICATE, UNKNOWN, MISMATCH = "recorded", "duplicate", "unknown", "mismatch"


class Ledger:
    """Thread-safe access to ``receipts.db`` (one SQLite connection per thread); every change
    wakes the threads blocked in :meth:`wait_for`."""

    def __init__(self, path: Path) -> None:
        from bridgecli import paths

        self.path = path
        paths.ensure_private_dir(path.parent)
        paths.ensure_private_file(path)
        self._local = threading.local()
        self._changed = threading.Condition()
        self._db().executescript(_SCHEMA)
        for suffix in ("-wal", "-shm"):
            paths.tighten(Path(f"{path}{suffix}"))

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # a receipt lost to a power cut is only a receipt
            self._local.db = db
        return db

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """The writes inside it (on this thread) as one transaction; waiters wake at its commit."""
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        self._local.batching = True
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK")
            raise
        else:
            db.execute("COMMIT")
        finally:
            self._local.batching = False
        self._wake()

    def track(self, envelopes: Iterable[Envelope]) -> None:
        """Start a row for each message about to be published (before it can be delivered:
        a local recipient's receipt may come before the broker's confirm)."""
        now = time.time()
        self._db().executemany(
            "INSERT OR IGNORE INTO tracked (msg_id, recipient, sender, kind, created) VALUES (?,?,?,?,?)",
            [(e.msg_id, e.recipient, e.sender, e.kind, now) for e in envelopes],
        )

    def sent(self, msg_id: str, at: float | None = None) -> None:
        """The broker confirmed ``msg_id``."""
        self._db().execute(
            "UPDATE tracked SET sent_at = ? WHERE msg_id = ? AND sent_at IS NULL",
            (time.time() if at is None else at, msg_id),
        )
        self._wake()

    def forget(self, msg_ids: Iterable[str]) -> None:
        """Drop the rows of messages whose publish failed (the sender got the error)."""
        self._db().executemany("DELETE FROM tracked WHERE msg_id = ?", [(m,) for m in msg_ids])

    def apply(self, receipt: Receipt) -> str:
        """Record ``receipt`` if its state is new for its message and it names the row's
        recipient: :data:`RECORDED`; else :data:`DUPLICATE`, :data:`UNKNOWN` (no such message
        was sent from here) or :data:`MISMATCH` (another recipient)."""
        column = _COLUMN[receipt.state]
        db = self._db()
        if receipt.state == DEAD:
            cur = db.execute(
                "UPDATE tracked SET dead_at = ?, dead_reason = ?"
                " WHERE msg_id = ? AND recipient = ? AND dead_at IS NULL",
                (receipt.at, receipt.reason, receipt.msg_id, receipt.recipient),
            )
        else:
            cur = db.execute(
                f"UPDATE tracked SET {column}_at = ?, {column}_how = ?, {column}_ref = ?"  # noqa: S608 (a fixed name)
                f" WHERE msg_id = ? AND recipient = ? AND {column}_at IS NULL",
                (receipt.at, receipt.how, receipt.ref, receipt.msg_id, receipt.recipient),
            )
        if cur.rowcount == 1:
            self._wake()
            return RECORDED
        row = db.execute("SELECT recipient FROM tracked WHERE msg_id = ?", (receipt.msg_id,)).fetchone()
        if row is None:
            return UNKNOWN
        return DUPLICATE if row["recipient"] == receipt.recipient else MISMATCH

    def get_many(self, msg_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The records of the full ids ``msg_ids`` that the ledger has, by id: one query per
        500 ids, not one per message (a page of history asks for all its sent messages)."""
        wanted = list(dict.fromkeys(msg_ids))
        db = self._db()
        records: dict[str, dict[str, Any]] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT * FROM tracked WHERE msg_id IN ({marks})"  # noqa: S608 (only placeholders)
            for row in db.execute(query, chunk):
                records[row["msg_id"]] = record_of(row)
        return records

    def get(self, msg_id: str) -> dict[str, Any] | None:
        """The record of ``msg_id`` (a full id, or a prefix of at least 8 characters naming one
        message) as its wire object, else None; :class:`LookupError` for an ambiguous prefix."""
        db = self._db()
        rows = db.execute("SELECT * FROM tracked WHERE msg_id = ?", (msg_id,)).fetchall()
        if not rows and len(msg_id) >= 8:
            rows = db.execute(
                "SELECT * FROM tracked WHERE msg_id >= ? AND msg_id < ? LIMIT 2", (msg_id, msg_id + "\uffff")
            ).fetchall()
        if len(rows) > 1:
            raise LookupError(f"{msg_id} is the start of several tracked messages")
        return record_of(rows[0]) if rows else None

    def recent(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` records, newest first."""
        rows = self._db().execute("SELECT * FROM tracked ORDER BY created DESC LIMIT ?", (limit,)).fetchall()
        return [record_of(row) for row in rows]

    def prune(self, keep: float) -> int:
        """Forget the records created more than ``keep`` seconds ago."""
        return self._db().execute("DELETE FROM tracked WHERE created < ?", (time.time() - keep,)).rowcount

    def wait_for(self, msg_id: str, states: tuple[str, ...], timeout: float) -> dict[str, Any] | None:
        """Block until ``msg_id``'s record has one of ``states`` (or up to ``timeout`` seconds);
        the record then (None: not tracked here)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                record = self.get(msg_id)
                remaining = deadline - time.monotonic()
                if record is None or any(state in record["states"] for state in states) or remaining <= 0:
                    return record
                self._changed.wait(min(remaining, 1.0))

    def _wake(self) -> None:
        if getattr(self._local, "batching", False):
            return  # at the commit
        with self._changed:
            self._changed.notify_all()

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


def record_of(row: sqlite3.Row) -> dict[str, Any]:
    """A ledger row as the wire object ``bridge track --json`` prints: ``states`` maps each
    state reached to its time, how and reference (or reason)."""
    states: dict[str, dict[str, Any]] = {}
    if row["sent_at"] is not None:
        states[SENT] = {"at": row["sent_at"]}
    for state, column in ((DELIVERED, "delivered"), (READ, "read")):
        if row[f"{column}_at"] is not None:
            states[state] = {
                key: value
                for key, value in (
                    ("at", row[f"{column}_at"]),
                    ("how", row[f"{column}_how"]),
                    ("ref", row[f"{column}_ref"]),
                )
                if value is not None
            }
    if row["dead_at"] is not None:
        states[DEAD] = {"at": row["dead_at"], "reason": row["dead_reason"]}
    return {
        "msgId": row["msg_id"],
        "to": row["recipient"],
        "from": row["sender"],
        "kind": row["kind"],
        "created": row["created"],
        "states": states,
    }
