"""The host's message history: ``archive.db`` beside the message store, searchable (FTS5).

One row per message per local entity: what it sent (once the broker confirmed it) and what
it received (once delivered or held). Content is stored as received and never interpreted;
user search text only ever reaches SQLite as bound, quoted FTS5 strings. A file that SQLite
calls corrupt is renamed aside (``archive.db.corrupt-<unix time>``) and a fresh one started:
history is a convenience, and must never stop the gateway. A file of its own: its writes
never wait behind a delivery burst's transaction in the message store (docs/history.md).
"""

from __future__ import annotations

import logging
import operator
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger("bridgecli.archive")

#: the columns of one archived message, in order (``add`` takes dicts with these keys)
COLUMNS = (
    "msg_id",
    "copy_of",
    "direction",
    "owner",
    "sender",
    "sender_label",
    "sender_host",
    "recipient",
    "channel",
    "kind",
    "in_reply_to",
    "turn",
    "content",
    "ts",
    "archived_at",
    "user_id",
)
SENT, RECEIVED = "sent", "received"
#: the most messages :meth:`Archive.thread` gathers (a hostile reply storm stays bounded)
MAX_THREAD = 1000
#: SQLite's result codes for a damaged file: SQLITE_CORRUPT and SQLITE_NOTADB
_CORRUPT_CODES = (11, 26)
#: ... and their messages, for an error that carries no code (not "malformed MATCH expression")
_CORRUPT_TEXT = ("file is not a database", "database disk image is malformed")
_CHUNK = 500
_SURROGATES = dict.fromkeys(range(0xD800, 0xE000), "\ufffd")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    msg_id TEXT NOT NULL,
    copy_of TEXT,
    direction TEXT NOT NULL,
    owner TEXT NOT NULL,
    sender TEXT NOT NULL,
    sender_label TEXT,
    sender_host TEXT,
    recipient TEXT NOT NULL,
    channel TEXT,
    kind TEXT NOT NULL,
    in_reply_to TEXT,
    turn TEXT,
    content TEXT NOT NULL,
    ts REAL NOT NULL,
    archived_at REAL NOT NULL,
    user_id TEXT,
    UNIQUE (msg_id, direction, owner)
);
CREATE INDEX IF NOT EXISTS messages_owner ON messages (owner);
CREATE INDEX IF NOT EXISTS messages_archived ON messages (archived_at);
CREATE INDEX IF NOT EXISTS messages_reply ON messages (in_reply_to) WHERE in_reply_to IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_copy ON messages (copy_of) WHERE copy_of IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_channel ON messages (channel) WHERE channel IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content, sender_label, content='messages', content_rowid='id', tokenize='unicode61', prefix='2 3'
);
CREATE TRIGGER IF NOT EXISTS messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content, sender_label) VALUES (new.id, new.content, new.sender_label);
END;
CREATE TRIGGER IF NOT EXISTS messages_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content, sender_label)
    VALUES ('delete', old.id, old.content, old.sender_label);
END;
"""
#: a batch goes into an in-memory table first, then into ``messages`` by one statement: the
#: indexes' and triggers' work is then one program run, not one per row (less than half the CPU)
_STAGE = f"CREATE TEMP TABLE IF NOT EXISTS batch ({', '.join(COLUMNS)})"
_STAGE_ROW = f"INSERT INTO temp.batch VALUES ({', '.join('?' * len(COLUMNS))})"  # noqa: S608 (fixed)
_INSERT = f"INSERT OR IGNORE INTO messages ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS)} FROM temp.batch"  # noqa: S608 (fixed)
_ROW = operator.itemgetter(*COLUMNS)


def match_query(text: str) -> str | None:
    """``text`` as an FTS5 query that cannot be a syntax error: each whitespace-separated term
    quoted as an FTS5 string (all must match); a term typed with a trailing ``*`` is a prefix.
    None when no term is left."""
    terms = []
    for word in storable(text).replace("\x00", " ").split():  # NUL would end an FTS5 string early
        prefix = word.endswith("*")
        word = word.rstrip("*")
        if word:
            terms.append('"' + word.replace('"', '""') + '"' + ("*" if prefix else ""))
    return " ".join(terms) or None


def storable(text: str) -> str:
    """``text`` as SQLite can store it: a lone surrogate (valid JSON, not UTF-8) becomes U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.translate(_SURROGATES)
    return text


def is_corrupt(exc: BaseException) -> bool:
    """True when ``exc`` says the database file itself is damaged (not busy, not a bad query)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _CORRUPT_CODES
    return any(text in str(exc).lower() for text in _CORRUPT_TEXT)


class Archive:
    """Thread-safe access to ``archive.db`` (one SQLite connection per thread). ``on_set_aside``
    hears ``(new name, error)`` each time a corrupt file was renamed aside."""

    def __init__(self, path: Path, on_set_aside: Callable[[Path, str], None] | None = None) -> None:
        from bridgecli import paths

        self.path = path
        self.on_set_aside = on_set_aside
        #: how many corrupt files this process set aside
        self.set_aside = 0
        self._generation = 0
        self._lock = threading.Lock()
        self._local = threading.local()
        paths.ensure_private_dir(path.parent)
        self._run(lambda db: None)  # opens (and creates) it now: a corrupt file is set aside at start
        self.close()  # each thread that uses it opens its own connection

    # --- connections and a damaged file --------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is not None and self._local.generation == self._generation:
            return db
        if db is not None:  # the file this connection reads was set aside by another thread
            _close(db)
            self._local.db = None
        from bridgecli import paths

        generation = self._generation
        paths.ensure_private_file(self.path)
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        try:
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # before the first table: pruning can shrink the file
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # a message lost to a power cut is only history
            db.executescript(_SCHEMA)
            db.execute("PRAGMA temp_store=MEMORY")
            db.execute(_STAGE)
        except BaseException:
            _close(db)
            raise
        for suffix in ("-wal", "-shm"):
            paths.tighten(Path(f"{self.path}{suffix}"))
        self._local.db, self._local.generation = db, generation
        return db

    def _run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """``fn(connection)``; when the file turns out corrupt, set it aside and run ``fn`` once
        more on a fresh archive."""
        generation = self._generation
        try:
            return fn(self._db())
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                raise
            self._set_aside(generation, exc)
        return fn(self._db())

    def _set_aside(self, generation: int, exc: BaseException) -> None:
        """Rename the damaged file (and its ``-wal``/``-shm``) aside, unless another thread
        already did since ``generation``."""
        db = getattr(self._local, "db", None)
        if db is not None:
            _close(db)
            self._local.db = None
        with self._lock:
            if generation != self._generation:
                return
            aside = Path(f"{self.path}.corrupt-{int(time.time())}")
            while aside.exists():  # set aside twice in one second: keep both
                aside = Path(f"{aside}-{self.set_aside}")
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.replace(f"{self.path}{suffix}", f"{aside}{suffix}")
                except FileNotFoundError:
                    continue
            self._generation += 1
            self.set_aside += 1
        if self.on_set_aside is not None:
            self.on_set_aside(aside, str(exc))
        else:
            logger.warning("message archive %s was corrupt (%s); set aside as %s", self.path, exc, aside.name)

    # --- writing -------------------------------------------------------------------------

    def add(self, rows: Sequence[dict[str, Any]]) -> int:
        """Archive ``rows`` (dicts keyed by :data:`COLUMNS`) in one transaction; a message
        already archived for the same owner and direction is skipped. Returns how many were new."""

        batch = list(map(_ROW, rows))

        def write(db: sqlite3.Connection) -> int:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(_STAGE_ROW, batch)
                count = db.execute(_INSERT).rowcount
                db.execute("DELETE FROM temp.batch")
            except BaseException:
                _rollback(db)
                raise
            db.execute("COMMIT")
            return max(count, 0)

        return int(self._run(write)) if rows else 0

    def prune(self, keep_seconds: float, max_bytes: int) -> int:
        """Forget messages archived more than ``keep_seconds`` ago, then the oldest until the
        file's used pages fit in ``max_bytes``; returns how many rows went."""

        def run(db: sqlite3.Connection) -> int:
            gone = db.execute("DELETE FROM messages WHERE archived_at < ?", (time.time() - keep_seconds,)).rowcount
            for _ in range(8):  # each round deletes what the measured size says is over the cap
                used = _used_bytes(db)
                rows = db.execute("SELECT count(*) FROM messages").fetchone()[0] if used > max_bytes else 0
                if rows == 0:
                    break
                over = max(1, int(rows * (1 - 0.9 * max_bytes / used)))
                gone += db.execute(
                    "DELETE FROM messages WHERE id IN (SELECT id FROM messages ORDER BY id LIMIT ?)", (over,)
                ).rowcount
                db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
                db.execute("PRAGMA incremental_vacuum")
            if gone:
                db.execute("PRAGMA incremental_vacuum")
            return gone

        return int(self._run(run))

    # --- reading -------------------------------------------------------------------------

    def history(
        self,
        owner: str | None = None,
        peer: str | None = None,
        channel: str | None = None,
        search: str | None = None,
        since: float | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """Archived messages, newest first (in the order archived), at most ``limit``: of local
        entity ``owner``, exchanged with ``peer`` (sender or recipient), on ``channel``, whose
        content or sender label matches ``search`` (see :func:`match_query`), archived in the
        last ``since`` seconds."""
        where: list[str] = []
        params: list[Any] = []
        for clause, value in (("m.owner = ?", owner), ("m.channel = ?", channel)):
            if value is not None:
                where.append(clause)
                params.append(value)
        if peer is not None:
            where.append("(m.sender = ? OR m.recipient = ?)")
            params += [peer, peer]
        if since is not None:
            where.append("m.archived_at >= ?")
            params.append(time.time() - since)
        source, order = "messages m", "m.id"
        if search is not None:
            query = match_query(search)
            if query is None:
                return []
            # the index drives, newest first, and stops at the limit: never a scan of an
            # owner's rows with a MATCH per row (the planner's choice without CROSS JOIN)
            source, order = "messages_fts f CROSS JOIN messages m ON m.id = f.rowid", "f.rowid"
            where.insert(0, "messages_fts MATCH ?")
            params.insert(0, query)
        sql = f"SELECT m.* FROM {source}"  # noqa: S608 (fixed fragments; every value is bound)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {order} DESC LIMIT ?"
        params.append(max(0, int(limit)))
        rows = self._run(lambda db: db.execute(sql, params).fetchall())
        return [row_dict(row) for row in rows]

    def gids_labelled(self, label: str) -> list[str]:
        """The senders archived under ``label`` (a peer gone from the roster is still found)."""
        rows = self._run(
            lambda db: db.execute(
                "SELECT DISTINCT sender FROM messages WHERE sender_label = ? LIMIT 10", (label,)
            ).fetchall()
        )
        return [row[0] for row in rows]

    def thread(self, msg_id: str) -> list[dict[str, Any]]:
        """The conversation ``msg_id`` (a full id, or a prefix of at least 8 characters naming
        one message) belongs to, in time order: its ``inReplyTo`` chain up to the root, then
        every message answering any of them. A channel copy is the same message as its
        original (``copy_of``); each message is listed once. :class:`LookupError` for an
        ambiguous prefix; empty when the message is not archived here."""
        return list(self._run(lambda db: _thread(db, msg_id)))

    def count(self) -> int:
        return int(self._run(lambda db: db.execute("SELECT count(*) FROM messages").fetchone()[0]))

    def size(self) -> int:
        """Bytes the archive's pages use (what ``history.max_bytes`` caps)."""
        return int(self._run(_used_bytes))

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            _close(db)
            self._local.db = None


def row_dict(row: sqlite3.Row) -> dict[str, Any]:
    """An archived row as its wire object (camelCase, as the local API's messages)."""
    data = {
        "msgId": row["msg_id"],
        "copyOf": row["copy_of"],
        "direction": row["direction"],
        "owner": row["owner"],
        "kind": row["kind"],
        "from": row["sender"],
        "fromLabel": row["sender_label"],
        "fromHost": row["sender_host"],
        "to": row["recipient"],
        "channel": row["channel"],
        "inReplyTo": row["in_reply_to"],
        "turn": row["turn"],
        "ts": row["ts"],
        "archivedAt": row["archived_at"],
        "content": row["content"],
    }
    if row["user_id"]:
        data["user"] = row["user_id"]
    return data


def _thread(db: sqlite3.Connection, msg_id: str) -> list[dict[str, Any]]:
    start = _find(db, msg_id.lower())
    if start is None:
        return []
    seen = _aliases(db, {start})
    frontier = set(seen)
    while frontier and len(seen) < MAX_THREAD:  # up: what each answers, to the root
        parents = {r[0] for r in _select(db, "SELECT in_reply_to FROM messages WHERE msg_id IN ({})", frontier)}
        frontier = _aliases(db, {p for p in parents if p} - seen) - seen
        seen |= frontier
    frontier = set(seen)
    while frontier and len(seen) < MAX_THREAD:  # down: every answer to any of them
        children = {r[0] for r in _select(db, "SELECT msg_id FROM messages WHERE in_reply_to IN ({})", frontier)}
        frontier = _aliases(db, children - seen) - seen
        seen |= frontier
    rows = _select(db, "SELECT * FROM messages WHERE msg_id IN ({})", seen)
    rows.sort(key=lambda r: (r["direction"] != SENT, r["id"]))  # the sender's own row first
    kept: dict[str, sqlite3.Row] = {}
    for row in rows:
        kept.setdefault(row["copy_of"] or row["msg_id"], row)
    return [row_dict(r) for r in sorted(kept.values(), key=lambda r: (r["ts"], r["id"]))][:MAX_THREAD]


def _find(db: sqlite3.Connection, text: str) -> str | None:
    """The original id of the message ``text`` names (a full id or a unique prefix)."""
    rows = db.execute("SELECT msg_id, copy_of FROM messages WHERE msg_id = ? OR copy_of = ? LIMIT 1", (text, text))
    found = {row["copy_of"] or row["msg_id"] for row in rows}
    if not found and len(text) >= 8:
        upper = text + "\uffff"
        rows = db.execute(
            "SELECT msg_id, copy_of FROM messages WHERE (msg_id >= ? AND msg_id < ?)"
            " OR (copy_of >= ? AND copy_of < ?) LIMIT 50",
            (text, upper, text, upper),
        )
        found = {row["copy_of"] or row["msg_id"] for row in rows}
    if len(found) > 1:
        raise LookupError(f"{text} is the start of several archived messages")
    return next(iter(found), None)


def _aliases(db: sqlite3.Connection, ids: set[str]) -> set[str]:
    """``ids`` with the other ids of the same messages: a channel copy's original, and every
    copy of an original."""
    found = set(ids)
    originals = {r[0] for r in _select(db, "SELECT copy_of FROM messages WHERE msg_id IN ({})", ids) if r[0]}
    found |= originals
    found |= {r[0] for r in _select(db, "SELECT msg_id FROM messages WHERE copy_of IN ({})", found)}
    return found


def _select(db: sqlite3.Connection, template: str, ids: Iterable[str]) -> list[sqlite3.Row]:
    """``template`` (one ``IN ({})``) over ``ids``, in chunks of bound parameters."""
    listed = list(ids)
    rows: list[sqlite3.Row] = []
    for start in range(0, len(listed), _CHUNK):
        chunk = listed[start : start + _CHUNK]
        rows += db.execute(template.format(",".join("?" * len(chunk))), chunk).fetchall()
    return rows


def _used_bytes(db: sqlite3.Connection) -> int:
    pages = db.execute("PRAGMA page_count").fetchone()[0] - db.execute("PRAGMA freelist_count").fetchone()[0]
    return int(pages * db.execute("PRAGMA page_size").fetchone()[0])


def _rollback(db: sqlite3.Connection) -> None:
    try:
        db.execute("ROLLBACK")
    except sqlite3.Error:  # no transaction left to end (SQLite ended it on the error)
        return


def _close(db: sqlite3.Connection) -> None:
    try:
        db.close()
    except sqlite3.Error:  # closing a connection to a damaged file: it is dropped either way
        return
