"""Read-only SQLite queries through ``_sqlite3``, the C module the ``sqlite3`` package wraps.

Relies on ``_sqlite3`` (undocumented): its ``connect`` taking ``uri=`` and ``timeout=``, the
connection's ``execute``, ``fetchall`` and ``close``, and ``Error`` as the base of its errors,
the very objects ``sqlite3`` re-exports. Gains: ``sqlite3`` adds ``datetime`` and its adapters,
a third of a TAB's query (docs/decisions/raw-socket-client.md). If ``_sqlite3`` changes,
``tests/private_apis/test_sqlite_readonly.py`` fails: import ``sqlite3`` here instead (same
names), at that cost.
"""

from __future__ import annotations

import _sqlite3

TYPE_CHECKING = False  # typing costs a TAB more than the query: names for checkers only
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def rows(db: str, sql: str, params: Iterable[Any], timeout: float) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` on the SQLite file at absolute path ``db``, opened read-only (never
    created, never locked for writing); ``[]`` when it cannot be read within ``timeout``
    seconds (missing, busy, not a database) or ``sql`` fails."""
    # SQLite's URI rules: only these three have a meaning in a path (no urllib on a TAB)
    uri = "file:" + db.replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    try:
        connection = _sqlite3.connect(uri, uri=True, timeout=timeout)
        try:
            return connection.execute(sql, tuple(params)).fetchall()
        finally:
            connection.close()
    except _sqlite3.Error:
        return []
