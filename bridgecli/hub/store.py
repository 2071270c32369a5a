"""The hub's records: joined hosts, which host owns which gid, and open invites.

One SQLite file under the hub's private directory. It is the source of truth for grants: the
broker's permissions are derived from it (and re-derived at every registrar start), so a
gid's owner can never be two hosts and grants survive a restart of either.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridgecli.errors import Conflict

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hosts (host TEXT PRIMARY KEY, user TEXT NOT NULL UNIQUE,
    joined REAL NOT NULL, revoked REAL);
CREATE TABLE IF NOT EXISTS gids (gid TEXT PRIMARY KEY, host TEXT NOT NULL, label TEXT,
    claimed REAL NOT NULL);
CREATE TABLE IF NOT EXISTS invites (id TEXT PRIMARY KEY, host TEXT NOT NULL, created REAL NOT NULL,
    expires REAL NOT NULL, used REAL, revoked REAL, replace INTEGER NOT NULL DEFAULT 0);
"""


@dataclass(frozen=True)
class HostRecord:
    host: str
    user: str
    joined: float
    revoked: float | None


@dataclass(frozen=True)
class InviteRecord:
    invite_id: str
    host: str
    created: float
    expires: float
    used: float | None
    revoked: float | None
    replace: bool

    def state(self, now: float) -> str:
        """open, used, revoked or expired."""
        if self.used:
            return "used"
        if self.revoked:
            return "revoked"
        return "expired" if now >= self.expires else "open"


def _invite_record(row: tuple[Any, ...]) -> InviteRecord:
    """The record of a ``SELECT id, host, created, expires, used, revoked, replace`` row."""
    invite_id, host, created, expires, used, revoked, replace = row
    return InviteRecord(invite_id, host, created, expires, used, revoked, bool(replace))


class HubStore:
    """The hub database. Each method is one transaction; safe to use from several processes
    (the registrar and `bridge hub` commands) because SQLite serialises the writers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")  # a grant must not vanish in a power cut
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    # --- hosts -------------------------------------------------------------------------
    def host(self, host: str) -> HostRecord | None:
        row = self.db.execute("SELECT host, user, joined, revoked FROM hosts WHERE host=?", (host,)).fetchone()
        return HostRecord(*row) if row else None

    def host_of_user(self, user: str) -> HostRecord | None:
        """The joined (not revoked) host whose broker user is ``user``."""
        row = self.db.execute(
            "SELECT host, user, joined, revoked FROM hosts WHERE user=? AND revoked IS NULL", (user,)
        ).fetchone()
        return HostRecord(*row) if row else None

    def hosts(self) -> list[HostRecord]:
        return [HostRecord(*r) for r in self.db.execute("SELECT host, user, joined, revoked FROM hosts ORDER BY host")]

    def add_host(self, host: str, user: str) -> None:
        """Record ``host`` as joined now (a re-join after a revoke keeps its gids)."""
        self.db.execute(
            "INSERT INTO hosts (host, user, joined, revoked) VALUES (?, ?, ?, NULL) "
            "ON CONFLICT(host) DO UPDATE SET user=excluded.user, joined=excluded.joined, "
            "revoked=NULL",
            (host, user, time.time()),
        )

    def revoke_host(self, host: str) -> bool:
        cur = self.db.execute("UPDATE hosts SET revoked=? WHERE host=? AND revoked IS NULL", (time.time(), host))
        return cur.rowcount > 0

    # --- gids --------------------------------------------------------------------------
    def claim(self, host: str, entities: list[tuple[str, str | None]]) -> None:
        """Record ``host`` as owner of each (gid, label); all or nothing.

        Raises Conflict when any gid belongs to another host: a gid is its owner's for good.
        """
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for gid, label in entities:
                row = self.db.execute("SELECT host FROM gids WHERE gid=?", (gid,)).fetchone()
                if row and row[0] != host:
                    raise Conflict(
                        f"gid {gid} belongs to host {row[0]}", "a gid can only be served by the host that registered it"
                    )
                self.db.execute(
                    "INSERT INTO gids (gid, host, label, claimed) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(gid) DO UPDATE SET label=excluded.label",
                    (gid, host, label, time.time()),
                )
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def release(self, host: str, gids: list[str]) -> int:
        """Give up ``host``'s ownership of ``gids`` (another host's gids are left alone)."""
        cur = self.db.executemany("DELETE FROM gids WHERE gid=? AND host=?", [(g, host) for g in gids])
        return cur.rowcount

    def gids_of(self, host: str) -> list[tuple[str, str | None]]:
        return [
            (g, lbl)
            for g, lbl in self.db.execute("SELECT gid, label FROM gids WHERE host=? ORDER BY claimed, gid", (host,))
        ]

    def owner(self, gid: str) -> str | None:
        row = self.db.execute("SELECT host FROM gids WHERE gid=?", (gid,)).fetchone()
        return row[0] if row else None

    # --- invites -----------------------------------------------------------------------
    def add_invite(self, invite_id: str, host: str, expires: float, replace: bool) -> None:
        self.db.execute(
            "INSERT INTO invites (id, host, created, expires, replace) VALUES (?, ?, ?, ?, ?)",
            (invite_id, host, time.time(), expires, int(replace)),
        )

    def invite(self, invite_id: str) -> InviteRecord | None:
        row = self.db.execute(
            "SELECT id, host, created, expires, used, revoked, replace FROM invites WHERE id=?", (invite_id,)
        ).fetchone()
        return _invite_record(row) if row else None

    def invites(self) -> list[InviteRecord]:
        return [
            _invite_record(r)
            for r in self.db.execute(
                "SELECT id, host, created, expires, used, revoked, replace FROM invites ORDER BY created"
            )
        ]

    def use_invite(self, invite_id: str) -> bool:
        """Mark an open invite used; False when it was not open (used, revoked: once only)."""
        cur = self.db.execute(
            "UPDATE invites SET used=? WHERE id=? AND used IS NULL AND revoked IS NULL", (time.time(), invite_id)
        )
        return cur.rowcount > 0

    def revoke_invite(self, invite_id: str) -> bool:
        cur = self.db.execute(
            "UPDATE invites SET revoked=? WHERE id=? AND used IS NULL AND revoked IS NULL", (time.time(), invite_id)
        )
        return cur.rowcount > 0
