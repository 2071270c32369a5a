"""Three-way merge of a cluster hub's records, row by row.

Two registrars can change the records in the same second: the active one recording a grant
while the hub machine's ``bridge hub`` command adds an invite. Loading the other's copy over
ours would drop one change, so :func:`merge_into` keeps every row only one side changed since
their common copy. A row both changed goes to the greater of the two images (set fields above
unset ones, then by value), the same on every registrar, so that both sides publish the same
records and the cluster converges. Why: docs/decisions/hub-records-replica.md.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from typing import Any

logger = logging.getLogger("bridgecli.hub.registrar")
#: the replicated tables and the primary key column of each
TABLES: dict[str, str] = {"hosts": "host", "gids": "gid", "invites": "id", "nodes": "name"}

Row = tuple[Any, ...]
Rows = dict[str, dict[Any, Row]]


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def read_rows(db: sqlite3.Connection, columns: dict[str, list[str]]) -> Rows:
    """Every row of each replicated table, by key, with ``columns[table]`` in that order."""
    rows: Rows = {}
    for table, key in TABLES.items():
        names = columns[table]
        at = names.index(key)
        have = set(_columns(db, table))
        select = ", ".join(name if name in have else "NULL" for name in names)
        rows[table] = {row[at]: tuple(row) for row in db.execute(f"SELECT {select} FROM {table}")}
    return rows


def snapshot_rows(data: bytes, columns: dict[str, list[str]]) -> Rows:
    """:func:`read_rows` of a database snapshot (``sqlite3.Connection.serialize`` bytes)."""
    copy = sqlite3.connect(":memory:")
    try:
        copy.deserialize(data)
        return read_rows(copy, columns)
    finally:
        copy.close()


def holds(db: sqlite3.Connection, data: bytes) -> bool:
    """Whether ``db`` holds the same rows as the snapshot ``data``: nothing of its own to publish."""
    columns = {table: _columns(db, table) for table in TABLES}
    return read_rows(db, columns) == snapshot_rows(data, columns)


def _order(row: Row | None) -> tuple[Any, ...]:
    """A total order on row images: a deleted row first, then field by field, unset first."""
    if row is None:
        return (0,)
    return (1, *((value is not None, type(value).__name__, value if value is not None else 0) for value in row))


def three_way(base: Rows, ours: Rows, theirs: Rows) -> tuple[dict[str, dict[Any, Row | None]], list[str]]:
    """What to write to ``ours`` so that it holds both sides' changes since ``base``: per
    table, key -> the row image (None: delete); and the conflicts, one phrase each."""
    writes: dict[str, dict[Any, Row | None]] = {}
    conflicts: list[str] = []
    for table in TABLES:
        b, o, t = base.get(table, {}), ours.get(table, {}), theirs.get(table, {})
        for key in _keys(o, t, b):
            mine, other, was = o.get(key), t.get(key), b.get(key)
            if mine == other or other == was:
                continue  # the same, or only we changed it: ours stands
            if mine == was:
                chosen = other
            else:
                chosen = max(mine, other, key=_order)
                conflicts.append(f"{table} {key!r}")
            if chosen != mine:
                writes.setdefault(table, {})[key] = chosen
    return writes, conflicts


def _keys(*sides: dict[Any, Row]) -> Iterable[Any]:
    seen: dict[Any, None] = {}
    for side in sides:
        seen.update(dict.fromkeys(side))
    return seen


def merge_into(db: sqlite3.Connection, base: bytes, theirs: bytes) -> int:
    """Write into ``db`` the changes ``theirs`` made since ``base`` (both snapshots) that
    ``db`` has not changed itself, and the greater image of a row both changed; one
    transaction, so that a ``bridge hub`` command writing meanwhile waits. Returns the rows
    written."""
    db.execute("BEGIN IMMEDIATE")
    try:
        columns = {table: _columns(db, table) for table in TABLES}
        writes, conflicts = three_way(
            snapshot_rows(base, columns), read_rows(db, columns), snapshot_rows(theirs, columns)
        )
        for table, rows in writes.items():
            key = TABLES[table]
            for value, row in rows.items():
                db.execute(f"DELETE FROM {table} WHERE {key}=?", (value,))
                if row is not None:
                    marks = ", ".join("?" * len(row))
                    db.execute(f"INSERT INTO {table} ({', '.join(columns[table])}) VALUES ({marks})", row)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    if conflicts:
        logger.warning("both copies of the hub records changed %s; kept the later state of each", ", ".join(conflicts))
    return sum(len(rows) for rows in writes.values())
