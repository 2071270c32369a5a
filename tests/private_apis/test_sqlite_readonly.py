"""Pins ``bridgecli.private_apis.sqlite_readonly`` to the C module ``_sqlite3``: the names it
calls are the ones ``sqlite3`` re-exports, and a real database file is read, never written,
created or waited on past the timeout."""

from __future__ import annotations

import _sqlite3
import sqlite3
import time

import pytest

from bridgecli.private_apis.sqlite_readonly import rows


def test_the_names_used_are_what_the_sqlite3_package_exports():
    assert sqlite3.connect is _sqlite3.connect
    assert sqlite3.Connection is _sqlite3.Connection
    assert sqlite3.Error is _sqlite3.Error
    assert issubclass(_sqlite3.OperationalError, _sqlite3.Error)
    for name in ("execute", "close"):
        assert callable(getattr(_sqlite3.Connection, name)), name
    assert callable(_sqlite3.Cursor.fetchall)


@pytest.fixture(params=["plain", "odd %20 ?x=1 #y"])
def db(request, tmp_path):
    """A database file written through the public sqlite3 package; the second name holds every
    character SQLite's URIs give a meaning."""
    path = tmp_path / request.param / "t.db"
    path.parent.mkdir()
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (id INTEGER, name TEXT, score REAL, raw BLOB)")
        connection.executemany(
            "INSERT INTO t VALUES (?, ?, ?, ?)", [(1, "é 日本", 0.5, b"\x00\xff"), (2, None, -1e300, None)]
        )
    connection.close()
    return str(path)


def test_rows_come_back_as_sqlite3_reads_them(db):
    expected = [(1, "é 日本", 0.5, b"\x00\xff"), (2, None, -1e300, None)]
    assert rows(db, "SELECT * FROM t ORDER BY id", (), 1.0) == expected
    assert rows(db, "SELECT name FROM t WHERE id = ?", iter([1]), 1.0) == [("é 日本",)]


def test_the_file_is_never_written_nor_created(db, tmp_path):
    assert rows(db, "INSERT INTO t (id) VALUES (3)", (), 1.0) == []  # read-only: an error, caught
    assert rows(db, "SELECT count(*) FROM t", (), 1.0) == [(2,)]
    missing = tmp_path / "none.db"
    assert rows(str(missing), "SELECT 1", (), 1.0) == []
    assert not missing.exists()
    assert rows(db, "SELECT nope FROM t", (), 1.0) == []


def test_a_locked_file_is_given_up_after_the_timeout(db):
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")  # rollback journal: readers wait for it
    try:
        started = time.monotonic()
        assert rows(db, "SELECT count(*) FROM t", (), 0.2) == []
        assert 0.15 < time.monotonic() - started < 5
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert rows(db, "SELECT count(*) FROM t", (), 0.2) == [(2,)]
