"""The gateway's durable state on this host: received messages (dedup + hold) and attempts.

One SQLite file in the user state dir. The dedup record and the hold are one transaction, so
a gateway killed at any instant either has a message (and drops its redelivery) or takes it
again: exactly-once at the hold. Every commit an ack follows is on disk first (:meth:`Store.sync`
after a burst; ``synchronous=FULL`` for a worker's record), so a power cut loses nothing either.
Held messages are never pruned; other ids beyond ``messaging.dedup_window`` are.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bridgecli import envelope as env_mod
from bridgecli.envelope import Envelope
from bridgecli.hoststate.checkpoint import WalCheckpointer, leave_checkpoints_to_thread
from bridgecli.hoststate.recent import RecentEnvelopes
from bridgecli.hoststate.transaction import Transaction

HELD, DELIVERED, DRAINED = "held", "delivered", "drained"
#: handed to a local client that has not confirmed it yet: back to held if the client goes
#: away (or the gateway restarts) first; drained on its confirm
TAKEN = "taken"
#: handed to a backend, not confirmed yet: visible to ``bridge reply``/``show`` (an exec
#: command may answer from inside its own delivery) but not a duplicate on redelivery
DELIVERING = "delivering"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    msg_id TEXT PRIMARY KEY,
    recipient TEXT NOT NULL,
    sender TEXT NOT NULL,
    kind TEXT NOT NULL,
    in_reply_to TEXT,
    body TEXT NOT NULL,
    user_id TEXT,
    state TEXT NOT NULL,
    received REAL NOT NULL,
    drained REAL,
    handed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_held ON messages (recipient, state, received);
CREATE INDEX IF NOT EXISTS messages_reply ON messages (in_reply_to);
CREATE TABLE IF NOT EXISTS attempts (
    msg_id TEXT PRIMARY KEY,
    count INTEGER NOT NULL,
    last_error TEXT,
    updated REAL NOT NULL
);
"""


@dataclass(frozen=True)
class StoredMessage:
    envelope: Envelope
    state: str
    received: float
    #: handed to a client before, which never confirmed it: that reader may have seen it
    redelivered: bool = False


def _body(envelope: Envelope) -> str:
    """The JSON body to store: as received when we have it (no re-encoding)."""
    return envelope.raw if envelope.raw is not None else json.dumps(envelope.to_wire(), ensure_ascii=False)


def _row_to_message(row: sqlite3.Row) -> StoredMessage:
    envelope = env_mod.from_wire(json.loads(row["body"]), user_id=row["user_id"] or None)
    return StoredMessage(envelope, row["state"], row["received"], redelivered=bool(row["handed"]))


class Store:
    """Thread-safe access to the state database (one SQLite connection per thread)."""

    def __init__(self, path: Path, dedup_window: int = 100_000) -> None:
        self.path = path
        #: WAL syncs made for acks (see :meth:`sync`); shown by `bridge status`
        self.syncs = 0
        self.dedup_window = dedup_window
        self._local = threading.local()
        self._inserts = 0
        #: inserts between prunes: a tenth of the window (at least 1,000), so a prune's count
        #: of the table is paid once per many messages; the table keeps at most 10 % more
        self._prune_every = max(1000, dedup_window // 10)
        #: msg ids with attempt rows written by this process (attempt rows left by an earlier
        #: process are swept by prune(): a message delivered since has no use for them)
        self._attempted: set[str] = set()
        self._checkpointer: WalCheckpointer | None = None
        #: what this process handed to local clients last, for :meth:`envelope`
        self.recent = RecentEnvelopes()
        from bridgecli import paths

        # held message bodies: the owner's only (SQLite gives -wal/-shm the file's mode)
        paths.ensure_private_dir(path.parent)
        paths.ensure_private_file(path)
        for suffix in ("-wal", "-shm"):
            paths.tighten(Path(f"{path}{suffix}"))
        self._db().executescript(_SCHEMA)
        if "handed" not in {r["name"] for r in self._db().execute("PRAGMA table_info(messages)")}:  # older store
            self._db().execute("ALTER TABLE messages ADD COLUMN handed INTEGER NOT NULL DEFAULT 0")

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL here; the connections whose commits an ack follows switch to FULL
            # (make_durable): losing any other write in a power cut only repeats a message
            db.execute("PRAGMA synchronous=NORMAL")
            if self._checkpointer is not None:
                leave_checkpoints_to_thread(db)
            self._local.db = db
        return db

    # --- checkpoints (the gateway) ------------------------------------------------------

    def checkpoint_in_background(self) -> None:
        """Copy the WAL into the database from a thread of its own when the gateway is idle,
        not inside a delivery's commit (why: :mod:`bridgecli.hoststate.checkpoint`)."""
        if self._checkpointer is not None:
            return
        self._checkpointer = WalCheckpointer(self.path)
        db = getattr(self._local, "db", None)
        if db is not None:
            leave_checkpoints_to_thread(db)
        self._checkpointer.start()

    class _Tx:
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def __enter__(self) -> sqlite3.Connection:
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type, exc, tb) -> None:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")

    class _Joined:
        """Statements of a write given a :class:`Transaction`: they join it."""

        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def __enter__(self) -> sqlite3.Connection:
            return self.db

        def __exit__(self, exc_type, exc, tb) -> None:
            pass

    def _tx(self, tx: Transaction | None = None) -> _Tx | _Joined:
        return Store._Tx(self._db()) if tx is None else Store._Joined(tx.db)

    # --- bursts (the gateway's I/O thread) -------------------------------------------

    def sync(self) -> None:
        """Make every commit so far durable against a power cut (``fdatasync`` of the WAL,
        and of its directory the first time, so the WAL file itself is found after a crash).

        The gateway's I/O thread commits a burst with ``synchronous=NORMAL`` (safe against a
        crash), hands it to waiting clients, then calls this before acking: one sync for
        the bursts of the last few milliseconds, not one per message. ``fdatasync`` is what
        SQLite itself uses; it skips the timestamps, which made a full ``fsync`` several times
        slower here."""
        try:
            fd = os.open(f"{self.path}-wal", os.O_RDONLY)
        except FileNotFoundError:
            return  # nothing committed through the WAL yet
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
        if not self.syncs:
            directory = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        self.syncs += 1

    def make_durable(self) -> None:
        """Fsync every commit of this thread's connection (``synchronous=FULL``): for the
        threads whose commits an ack follows (the gateway's I/O thread, delivery workers)."""
        if not getattr(self._local, "durable", False):
            self._db().execute("PRAGMA synchronous=FULL")
            self._local.durable = True

    def synchronous(self) -> str:
        """The ``synchronous`` mode in force on this thread's connection (OFF … EXTRA)."""
        level = self._db().execute("PRAGMA synchronous").fetchone()[0]
        return {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(level, str(level))

    def begin(self) -> Transaction:
        """Open one write transaction on this thread's connection; the writes given it join
        it, so a burst of deliveries costs one commit instead of one each."""
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        return Transaction(db)

    # --- receiving ----------------------------------------------------------------------

    def seen(self, msg_id: str) -> bool:
        """True when ``msg_id`` was already taken (held, delivered or drained): a duplicate."""
        row = (
            self._db()
            .execute("SELECT 1 FROM messages WHERE msg_id = ? AND state != 'delivering'", (msg_id,))
            .fetchone()
        )
        return row is not None

    def stage(self, envelope: Envelope, tx: Transaction | None = None) -> None:
        """Make a message visible to ``reply``/``show`` while its backend works on it."""
        with self._tx(tx) as db:
            db.execute(
                "INSERT OR IGNORE INTO messages (msg_id, recipient, sender, kind, in_reply_to, body,"
                " user_id, state, received) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    envelope.msg_id,
                    envelope.recipient,
                    envelope.sender,
                    envelope.kind,
                    envelope.in_reply_to,
                    _body(envelope),
                    envelope.user_id,
                    DELIVERING,
                    time.time(),
                ),
            )

    def record(
        self, envelope: Envelope, state: str, received: float | None = None, tx: Transaction | None = None
    ) -> bool:
        """Record a received message as ``held``, ``delivered`` or — handed to a waiting
        ``poll``/``send --wait`` in the same step — ``drained`` (``taken`` when that client
        confirms). Returns False (and changes
        nothing) when it was already recorded — the dedup check and the write are one step.
        With ``tx`` the write joins that transaction."""
        received = time.time() if received is None else received
        if tx is None:
            self.make_durable()  # an ack follows this write
        with self._tx(tx) as db:
            cur = db.execute(
                "INSERT INTO messages (msg_id, recipient, sender, kind, in_reply_to, body,"
                " user_id, state, received, drained) VALUES (?,?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT(msg_id) DO UPDATE SET state = excluded.state WHERE state = 'delivering'",
                (
                    envelope.msg_id,
                    envelope.recipient,
                    envelope.sender,
                    envelope.kind,
                    envelope.in_reply_to,
                    _body(envelope),
                    envelope.user_id,
                    state,
                    received,
                    received if state in (DRAINED, TAKEN) else None,
                ),
            )
            if envelope.msg_id in self._attempted:  # rare: skip the DELETE on the hot path
                db.execute("DELETE FROM attempts WHERE msg_id = ?", (envelope.msg_id,))
                self._attempted.discard(envelope.msg_id)
            inserted = cur.rowcount == 1
        if inserted:
            if state in (DRAINED, TAKEN):  # handed to a local client, which may reply
                if tx is None:
                    self.recent.add(envelope)
                else:
                    tx.after_commit(lambda: self.recent.add(envelope))
            self._inserts += 1
            if self._inserts % self._prune_every == 0:
                self.prune(tx)
        return inserted

    def prune(self, tx: Transaction | None = None) -> int:
        """Forget the oldest non-held ids beyond the dedup window (and stale attempt counts).
        Oldest by insertion: the rowid order the table is stored in, so no sort. Every
        statement here stays cheap at a full window (docs/decisions/dedup-pruning.md)."""
        with self._tx(tx) as db:
            db.execute(
                "DELETE FROM attempts WHERE EXISTS (SELECT 1 FROM messages WHERE messages.msg_id = attempts.msg_id"
                " AND messages.state IN ('held', 'delivered', 'drained'))"
            )
            (prunable,) = db.execute(
                "SELECT COUNT(*) FROM messages WHERE state NOT IN ('held', 'delivering', 'taken')"
            ).fetchone()
            if prunable <= self.dedup_window:
                return 0
            cur = db.execute(
                "DELETE FROM messages WHERE rowid IN (SELECT rowid FROM messages"
                " WHERE state NOT IN ('held', 'delivering', 'taken') ORDER BY rowid LIMIT ?)",
                (prunable - self.dedup_window,),
            )
            self.recent.clear()
            return cur.rowcount

    # --- attempts -----------------------------------------------------------------------

    def add_attempt(self, msg_id: str, error: str) -> int:
        """Count one failed delivery attempt; returns the total so far (survives restarts)."""
        self._attempted.add(msg_id)
        with self._tx() as db:
            db.execute(
                "INSERT INTO attempts (msg_id, count, last_error, updated) VALUES (?, 1, ?, ?)"
                " ON CONFLICT(msg_id) DO UPDATE SET count = count + 1, last_error = excluded.last_error,"
                " updated = excluded.updated",
                (msg_id, error[:500], time.time()),
            )
            return db.execute("SELECT count FROM attempts WHERE msg_id = ?", (msg_id,)).fetchone()[0]

    def clear_attempts(self, msg_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM attempts WHERE msg_id = ?", (msg_id,))

    # --- holding and draining -----------------------------------------------------------

    def drain(
        self,
        recipient: str,
        limit: int = 100,
        in_reply_to: str | None = None,
        mark: str = DRAINED,
        sender: str | None = None,
    ) -> list[StoredMessage]:
        """Take held messages for ``recipient`` (oldest first; only ``sender``'s when given)
        and mark them ``mark`` (:data:`TAKEN` for a client that confirms once it has them)."""
        query = "SELECT * FROM messages WHERE recipient = ? AND state = 'held'"
        args: list[object] = [recipient]
        if sender is not None:
            query += " AND sender = ?"
            args.append(sender)
        if in_reply_to is not None:
            query += " AND in_reply_to = ?"
            args.append(in_reply_to)
        query += " ORDER BY received LIMIT ?"
        args.append(limit)
        # look before taking the write lock: an empty hold (every `poll --wait` wakeup that
        # finds nothing, every first check) then costs one read instead of BEGIN IMMEDIATE
        # + COMMIT; what is found is read again inside the transaction
        if self._db().execute(query, args).fetchone() is None:
            return []
        with self._tx() as db:
            rows = db.execute(query, args).fetchall()
            now = time.time()
            db.executemany(
                "UPDATE messages SET state = ?, drained = ? WHERE msg_id = ?",
                [(mark, now, row["msg_id"]) for row in rows],
            )
        taken = [_row_to_message(row) for row in rows]
        for message in taken:
            self.recent.add(message.envelope)
        return taken

    def take_reply(self, recipient: str, in_reply_to: str, mark: str = DRAINED) -> StoredMessage | None:
        """The answer to ``in_reply_to`` received for ``recipient``: marked ``mark`` if it was
        held, returned as is if its backend already delivered it."""
        query = (
            "SELECT * FROM messages WHERE recipient = ? AND in_reply_to = ?"
            " AND state NOT IN ('drained', 'taken') ORDER BY received LIMIT 1"
        )
        db = self._db()
        while True:
            # read first, outside a transaction: `send --wait` checks several times per message
            # and a miss must not cost BEGIN IMMEDIATE + COMMIT (the I/O thread's write lock)
            row = db.execute(query, (recipient, in_reply_to)).fetchone()
            if row is None:
                return None
            if row["state"] != HELD:
                return _row_to_message(row)  # its backend delivered it: nothing to take
            with self._tx() as tx:
                taken = tx.execute(
                    "UPDATE messages SET state = ?, drained = ? WHERE msg_id = ? AND state = 'held'",
                    (mark, time.time(), row["msg_id"]),
                ).rowcount
            if taken:
                return _row_to_message(row)
            # drained by someone else in between: look again

    def release(self, msg_ids: list[str]) -> int:
        """Put messages that were taken for a waiter or a client which left without them back
        on hold (see ``Burst.hand_off``), marked redelivered; returns how many were."""
        with self._tx() as db:
            return db.executemany(
                "UPDATE messages SET state = 'held', drained = NULL, handed = handed + 1"
                " WHERE msg_id = ? AND state IN ('drained', 'taken')",
                [(m,) for m in msg_ids],
            ).rowcount

    def confirm(self, msg_ids: list[str]) -> int:
        """A client has the :data:`TAKEN` messages ``msg_ids``: they are drained for good."""
        with self._tx() as db:
            return db.executemany(
                "UPDATE messages SET state = 'drained' WHERE msg_id = ? AND state = 'taken'", [(m,) for m in msg_ids]
            ).rowcount

    def recover_taken(self) -> int:
        """Hold again what was handed to clients that never confirmed (the gateway died in
        between); called when a gateway starts. Returns how many."""
        with self._tx() as db:
            held_again = "UPDATE messages SET state = 'held', drained = NULL, handed = handed + 1"
            return db.execute(held_again + " WHERE state = 'taken'").rowcount

    def peek(self, recipient: str, limit: int = 100, sender: str | None = None) -> list[StoredMessage]:
        """Held messages for ``recipient`` (only ``sender``'s when given) without taking them
        (see :meth:`ack`)."""
        rows = (
            self._db()
            .execute(
                "SELECT * FROM messages WHERE recipient = ? AND state = 'held'"
                " AND (? IS NULL OR sender = ?) ORDER BY received LIMIT ?",
                (recipient, sender, sender, limit),
            )
            .fetchall()
        )
        return [_row_to_message(row) for row in rows]

    def ack(self, recipient: str, msg_ids: list[str]) -> int:
        """Mark peeked messages drained once the client has them; returns how many were."""
        with self._tx() as db:
            cur = db.executemany(
                "UPDATE messages SET state = 'drained', drained = ? WHERE msg_id = ?"
                " AND recipient = ? AND state = 'held'",
                [(time.time(), m.lower(), recipient) for m in msg_ids],
            )
            return cur.rowcount

    def held_count(self, recipient: str | None = None) -> int:
        if recipient is None:
            return self._db().execute("SELECT COUNT(*) FROM messages WHERE state = 'held'").fetchone()[0]
        return (
            self._db()
            .execute("SELECT COUNT(*) FROM messages WHERE state = 'held' AND recipient = ?", (recipient,))
            .fetchone()[0]
        )

    def oldest_held(self, recipient: str | None = None) -> float | None:
        """When the oldest message held for ``recipient`` (for anyone: None) arrived."""
        if recipient is None:
            return self._db().execute("SELECT MIN(received) FROM messages WHERE state = 'held'").fetchone()[0]
        row = (
            self._db()
            .execute("SELECT MIN(received) FROM messages WHERE state = 'held' AND recipient = ?", (recipient,))
            .fetchone()
        )
        return row[0]

    def get(self, msg_id: str) -> StoredMessage | None:
        row = self._db().execute("SELECT * FROM messages WHERE msg_id = ?", (msg_id.lower(),)).fetchone()
        return _row_to_message(row) if row else None

    def envelope(self, msg_id: str) -> Envelope | None:
        """The envelope of received message ``msg_id``: from memory when this process handed
        it to a local client lately, else read from the store."""
        cached = self.recent.get(msg_id)
        if cached is not None:
            return cached
        found = self.get(msg_id)
        return found.envelope if found else None

    def find_prefix(self, prefix: str) -> list[StoredMessage]:
        """Messages whose id starts with ``prefix`` (for short ids typed by humans)."""
        rows = (
            self._db().execute("SELECT * FROM messages WHERE msg_id LIKE ? LIMIT 5", (prefix.lower() + "%",)).fetchall()
        )
        return [_row_to_message(row) for row in rows]

    def size(self) -> int:
        return self._db().execute("SELECT COUNT(*) FROM messages").fetchone()[0]

    def held(self, recipient: str) -> Iterator[StoredMessage]:
        for row in self._db().execute(
            "SELECT * FROM messages WHERE recipient = ? AND state = 'held' ORDER BY received", (recipient,)
        ):
            yield _row_to_message(row)

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


def default_path() -> Path:
    from bridgecli import paths

    return paths.state_dir() / "gateway.db"


def open_store(config) -> Store:
    """The host's store, at its default path, with the configured dedup window."""
    return Store(default_path(), dedup_window=config.values["messaging.dedup_window"])
