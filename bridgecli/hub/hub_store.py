"""The hub's records: joined hosts, which host owns which gid, and open invites.

One SQLite file under the hub's private directory. It is the source of truth for grants: the
broker's permissions are derived from it (and re-derived at every registrar start), so a
gid's owner can never be two hosts and grants survive a restart of either. A released gid
keeps its row as a tombstone (``released`` set): it stays its host's for good, so no other
host can claim it later.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridgecli import gids as gids_mod
from bridgecli.errors import Conflict, Rejected
from bridgecli.hub.limits import MAX_LABEL
from bridgecli.sanitize import sanitize_line

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hosts (host TEXT PRIMARY KEY, user TEXT NOT NULL UNIQUE,
    joined REAL NOT NULL, revoked REAL);
CREATE TABLE IF NOT EXISTS gids (gid TEXT PRIMARY KEY, host TEXT NOT NULL, label TEXT,
    claimed REAL NOT NULL, released REAL);
CREATE TABLE IF NOT EXISTS invites (id TEXT PRIMARY KEY, host TEXT NOT NULL, created REAL NOT NULL,
    expires REAL NOT NULL, used REAL, revoked REAL, replace INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, address TEXT NOT NULL, nodename TEXT NOT NULL UNIQUE,
    joined REAL NOT NULL);
"""
#: columns added after the first release: (table, column, declaration)
_ADDED = [
    ("gids", "released", "REAL"),
    ("invites", "kind", "TEXT NOT NULL DEFAULT 'host'"),
    ("invites", "address", "TEXT"),
]
_INVITE_COLUMNS = "id, host, created, expires, used, revoked, replace, kind, address"


@dataclass(frozen=True)
class HostRecord:
    host: str
    user: str
    joined: float
    revoked: float | None


@dataclass(frozen=True)
class NodeRecord:
    """A cluster node of the hub: its name, AMQPS address, Erlang node name, join time."""

    name: str
    address: str
    nodename: str
    joined: float


@dataclass(frozen=True)
class InviteRecord:
    invite_id: str
    host: str
    created: float
    expires: float
    used: float | None
    revoked: float | None
    replace: bool
    kind: str = "host"  # "node": a cluster node's invite (``host`` is then the node's name)
    address: str | None = None  # a node invite's IP address

    def state(self, now: float) -> str:
        """open, used, revoked or expired."""
        if self.used:
            return "used"
        if self.revoked:
            return "revoked"
        return "expired" if now >= self.expires else "open"


def _invite_record(row: tuple[Any, ...]) -> InviteRecord:
    """The record of a ``SELECT`` of :data:`_INVITE_COLUMNS`."""
    invite_id, host, created, expires, used, revoked, replace, kind, address = row
    return InviteRecord(invite_id, host, created, expires, used, revoked, bool(replace), kind or "host", address)


class HubStore:
    """The hub database. Each method is one transaction; safe to use from several processes
    (the registrar and `bridge hub` commands) because SQLite serialises the writers."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")  # a grant must not vanish in a power cut
        self.db.executescript(_SCHEMA)
        for table, column, declaration in _ADDED:  # a hub.db written by an earlier version
            if column not in {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}:
                try:
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                except sqlite3.OperationalError as exc:  # another process added it just now
                    if "duplicate column" not in str(exc):
                        raise

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

    def restore_host(self, host: str, previous: HostRecord | None) -> None:
        """Put ``host``'s record back as ``previous`` was (None: as if it never joined)."""
        if previous is None:
            self.db.execute("DELETE FROM hosts WHERE host=?", (host,))
        else:
            self.db.execute(
                "UPDATE hosts SET user=?, joined=?, revoked=? WHERE host=?",
                (previous.user, previous.joined, previous.revoked, host),
            )

    def revoke_host(self, host: str) -> bool:
        cur = self.db.execute("UPDATE hosts SET revoked=? WHERE host=? AND revoked IS NULL", (time.time(), host))
        return cur.rowcount > 0

    # --- gids --------------------------------------------------------------------------
    def claim(self, host: str, entities: list[tuple[str, str | None]], *, max_live: int | None = None) -> list[str]:
        """Record ``host`` as owner of each (gid, label), labels made inert for terminals; all
        or nothing. Returns the gids that were not live before (new, or released and now back).

        Raises Conflict when any gid is or was another host's (a gid is its owner's for good,
        released or not), Rejected when ``host`` would then own more than ``max_live`` gids.
        """
        now = time.time()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            revived = []
            for gid, label in entities:
                row = self.db.execute("SELECT host, released FROM gids WHERE gid=?", (gid,)).fetchone()
                if row and row[0] != host:
                    raise Conflict(
                        f"gid {gid} belongs to host {row[0]}", "a gid can only be served by the host that registered it"
                    )
                if row is None or row[1] is not None:
                    revived.append(gid)
                self.db.execute(
                    "INSERT INTO gids (gid, host, label, claimed, released) VALUES (?, ?, ?, ?, NULL) "
                    "ON CONFLICT(gid) DO UPDATE SET label=excluded.label, released=NULL",
                    (gid, host, None if label is None else sanitize_line(label, max_chars=MAX_LABEL), now),
                )
            if max_live is not None and revived:
                live = self._live_count(host)
                if live > max_live:
                    raise Rejected(
                        f"host {host} would own {live} legacy gids; the limit is {max_live}",
                        "unregister entities this host no longer needs",
                    )
            self.db.execute("COMMIT")
            return revived
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _live_count(self, host: str) -> int:
        row = self.db.execute("SELECT COUNT(*) FROM gids WHERE host=? AND released IS NULL", (host,)).fetchone()
        return int(row[0])

    def release(self, host: str, gids: list[str]) -> list[str]:
        """Give up ``host``'s ownership of ``gids``: the ones it held are kept as tombstones
        (still its own, no longer granted) and returned; another host's are left alone."""
        now = time.time()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            released = [
                gid
                for gid in dict.fromkeys(gids)
                if self.db.execute(
                    "UPDATE gids SET released=? WHERE gid=? AND host=? AND released IS NULL", (now, gid, host)
                ).rowcount
            ]
            self.db.execute("COMMIT")
            return released
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def unrelease(self, host: str, gids: list[str]) -> None:
        """Undo :meth:`release` of ``gids`` (their grant could not be taken back)."""
        self.db.executemany("UPDATE gids SET released=NULL WHERE gid=? AND host=?", [(g, host) for g in gids])

    def gids_of(self, host: str) -> list[tuple[str, str | None]]:
        """``host``'s live (not released) gids with their labels, oldest first."""
        return [
            (g, lbl)
            for g, lbl in self.db.execute(
                "SELECT gid, label FROM gids WHERE host=? AND released IS NULL ORDER BY claimed, gid", (host,)
            )
        ]

    def owner(self, gid: str) -> str | None:
        """The host that holds ``gid`` now (None when nobody does, or its host released it)."""
        row = self.db.execute("SELECT host FROM gids WHERE gid=? AND released IS NULL", (gid,)).fetchone()
        return row[0] if row else None

    def claimants(self, gids: list[str]) -> dict[str, str]:
        """For each of ``gids`` the hub ever recorded: the host it belongs to for good."""
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(gids))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(self.db.execute(f"SELECT gid, host FROM gids WHERE gid IN ({marks})", chunk).fetchall())
        return found

    def tag_clash(self, host: str, hub_host: str) -> str | None:
        """Another host whose gid tag equals ``host``'s: the hub host or a joined (not revoked)
        host. Two such hosts would be granted each other's gids, so ``host`` may not join."""
        tag = gids_mod.host_tag(host)
        others = [hub_host] + [r.host for r in self.hosts() if r.revoked is None]
        return next((o for o in others if o != host and gids_mod.host_tag(o) == tag), None)

    # --- invites -----------------------------------------------------------------------
    def add_invite(
        self, invite_id: str, host: str, expires: float, replace: bool, kind: str = "host", address: str | None = None
    ) -> None:
        self.db.execute(
            "INSERT INTO invites (id, host, created, expires, replace, kind, address) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (invite_id, host, time.time(), expires, int(replace), kind, address),
        )

    def invite(self, invite_id: str) -> InviteRecord | None:
        row = self.db.execute(f"SELECT {_INVITE_COLUMNS} FROM invites WHERE id=?", (invite_id,)).fetchone()
        return _invite_record(row) if row else None

    def invites(self) -> list[InviteRecord]:
        return [_invite_record(r) for r in self.db.execute(f"SELECT {_INVITE_COLUMNS} FROM invites ORDER BY created")]

    def use_invite(self, invite_id: str) -> bool:
        """Mark an open invite used; False when it was not open (used, revoked: once only)."""
        cur = self.db.execute(
            "UPDATE invites SET used=? WHERE id=? AND used IS NULL AND revoked IS NULL", (time.time(), invite_id)
        )
        return cur.rowcount > 0

    def unuse_invite(self, invite_id: str) -> None:
        """Undo :meth:`use_invite` (the join it was used for failed and was rolled back)."""
        self.db.execute("UPDATE invites SET used=NULL WHERE id=?", (invite_id,))

    def revoke_invite(self, invite_id: str) -> bool:
        cur = self.db.execute(
            "UPDATE invites SET revoked=? WHERE id=? AND used IS NULL AND revoked IS NULL", (time.time(), invite_id)
        )
        return cur.rowcount > 0

    # --- cluster nodes -----------------------------------------------------------------
    def add_node(self, name: str, address: str, nodename: str) -> None:
        """Record node ``name`` as joined now (a node of that name is replaced)."""
        self.db.execute(
            "INSERT OR REPLACE INTO nodes (name, address, nodename, joined) VALUES (?, ?, ?, ?)",
            (name, address, nodename, time.time()),
        )

    def nodes(self) -> list[NodeRecord]:
        """Every recorded node, in the order they joined (the hub's own first)."""
        rows = self.db.execute("SELECT name, address, nodename, joined FROM nodes ORDER BY joined, name")
        return [NodeRecord(*r) for r in rows]

    def drop_node(self, name: str) -> bool:
        return self.db.execute("DELETE FROM nodes WHERE name=?", (name,)).rowcount > 0
