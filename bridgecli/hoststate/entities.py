"""The registry of entities hosted on this machine (docs/design.md#names): gid, label, role, delivery.

Stored durably in SQLite under the user data dir, so ``bridge register`` works with or
without a running gateway and a restarted gateway finds every entity again. The gateway
re-reads it when told (local API ``register``/``unregister``) — no restart needed.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from pathlib import Path

from bridgecli import gids
from bridgecli.errors import Ambiguous, BridgeError, ConfigError, Conflict, NotFound
from bridgecli.interfaces import Entity

ROLES = ("agent", "main", "orchestrator")
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entities (
    gid TEXT PRIMARY KEY,
    label TEXT NOT NULL,
    role TEXT NOT NULL,
    deliver TEXT NOT NULL,
    host TEXT NOT NULL,
    created REAL NOT NULL,
    launcher TEXT,
    launch_data TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS memberships (
    channel TEXT NOT NULL,
    gid TEXT NOT NULL,
    joined REAL NOT NULL,
    PRIMARY KEY (channel, gid)
);
"""


def validate_label(label: str) -> str:
    if not LABEL_RE.match(label):
        raise ConfigError(
            f"bad label {label!r}",
            "use 1-64 characters from letters, digits and _ . @ - (start with a letter or digit)",
        )
    return label


def validate_role(role: str) -> str:
    if role not in ROLES:
        raise ConfigError(f"bad role {role!r}", "use one of " + ", ".join(ROLES))
    return role


_MISSING = object()


class Registry:
    """CRUD over the entity table; safe to use from several processes at once.

    Reads are cached in memory, because the gateway looks up the sender on every request
    (~40 µs through SQLite). The cache is dropped whenever the database changed, through this
    object or any other process: in rollback-journal mode SQLite bumps the header's *file
    change counter* at every commit, and reading it costs ~1 µs. WAL mode does not keep that
    counter, so there the cache is off.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        from bridgecli import paths

        # labels, roles and launch data: the owner's only (SQLite gives -wal/-shm its mode)
        paths.ensure_private_dir(path.parent)
        paths.ensure_private_file(path)
        for suffix in ("-wal", "-shm", "-journal"):
            paths.tighten(Path(f"{path}{suffix}"))
        with self._connect() as db:
            db.executescript(_SCHEMA)
            wal = db.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
        self._lock = threading.Lock()
        self._by_gid: dict[str, Entity | None] = {}
        self._all: tuple[Entity, ...] | None = None
        #: gid -> the channels it is in, cached like the entities
        self._channels: dict[str, tuple[str, ...]] | None = None
        #: the change counter the cached entries were read at (None: nothing cached is valid)
        self._cached_at: bytes | None = None
        self._fd: int | None = None if wal else os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))

    def __del__(self) -> None:
        fd, self._fd = getattr(self, "_fd", None), None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def _counter(self) -> bytes | None:
        """The database's change counter now, after dropping the cache if it moved."""
        if self._fd is None:
            return None
        try:
            counter = os.pread(self._fd, 4, 24)
        except OSError:
            return None
        if counter != self._cached_at:
            with self._lock:
                if counter != self._cached_at:
                    self._by_gid.clear()
                    self._all = self._channels = None
                    self._cached_at = counter
        return counter

    def _invalidate(self) -> None:
        """After a write through this object: nothing cached so far is valid, and a read
        that started before the write must not be cached when it ends."""
        with self._lock:
            self._by_gid.clear()
            self._all = self._channels = None
            self._cached_at = None

    def _connect(self) -> sqlite3.Connection:
        """This thread's connection (kept: the gateway reads the registry on every send)."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            db.row_factory = sqlite3.Row
            self._local.db = db
        return db

    @staticmethod
    def _entity(row: sqlite3.Row) -> Entity:
        return Entity(
            gid=row["gid"],
            label=row["label"],
            role=row["role"],
            deliver=row["deliver"],
            host=row["host"],
            created=row["created"],
            launcher=row["launcher"],
            launch_data=json.loads(row["launch_data"] or "{}"),
        )

    def add(
        self,
        *,
        label: str,
        role: str,
        deliver: str,
        host: str,
        gid: str | None = None,
        launcher: str | None = None,
        launch_data: dict | None = None,
    ) -> Entity:
        """Mint a gid (unless given) and store the entity. A label already used on this host
        is refused: labels are how people address entities, so one host keeps them unique."""
        validate_label(label)
        validate_role(role)
        gid = gid or gids.mint(host)
        with self._connect() as db:
            # the write lock before the check: two processes registering one label at once
            # (two first sends of a default identity) must not both see it free
            db.execute("BEGIN IMMEDIATE")
            clash = db.execute("SELECT gid FROM entities WHERE label = ?", (label,)).fetchone()
            if clash:
                raise Conflict(
                    f"label {label!r} is already registered on this host (gid {clash['gid']})",
                    f"pick another label or `bridge unregister {label}` first",
                )
            db.execute(
                "INSERT INTO entities (gid, label, role, deliver, host, created, launcher, launch_data)"
                " VALUES (?,?,?,?,?,?,?,?)",
                (gid, label, role, deliver, host, time.time(), launcher, json.dumps(launch_data or {})),
            )
        self._invalidate()
        entity = self.get(gid)
        assert entity is not None
        return entity

    def remove(self, gid: str) -> bool:
        """Forget ``gid`` and its channel memberships."""
        try:
            with self._connect() as db:
                db.execute("DELETE FROM memberships WHERE gid = ?", (gid,))
                return db.execute("DELETE FROM entities WHERE gid = ?", (gid,)).rowcount == 1
        finally:
            self._invalidate()

    # --- channel memberships ------------------------------------------------------------

    def join(self, channel: str, gid: str) -> bool:
        """Make ``gid`` a member of ``channel``; False when it already was. Refused past
        :data:`bridgecli.channels.MAX_PER_ENTITY` channels (its heartbeat lists them)."""
        from bridgecli.channels import MAX_PER_ENTITY

        try:
            with self._connect() as db:
                db.execute("BEGIN IMMEDIATE")
                if db.execute("SELECT 1 FROM memberships WHERE channel = ? AND gid = ?", (channel, gid)).fetchone():
                    return False
                (count,) = db.execute("SELECT COUNT(*) FROM memberships WHERE gid = ?", (gid,)).fetchone()
                if count >= MAX_PER_ENTITY:
                    raise Conflict(
                        f"this entity is already in {count} channels, the most one may join",
                        "leave a channel first (`bridge channel leave NAME`)",
                    )
                db.execute("INSERT INTO memberships (channel, gid, joined) VALUES (?,?,?)", (channel, gid, time.time()))
                return True
        finally:
            self._invalidate()

    def leave(self, channel: str, gid: str) -> bool:
        """End ``gid``'s membership of ``channel``; False when it was not a member."""
        try:
            with self._connect() as db:
                cur = db.execute("DELETE FROM memberships WHERE channel = ? AND gid = ?", (channel, gid))
                return cur.rowcount == 1
        finally:
            self._invalidate()

    def channels(self) -> dict[str, tuple[str, ...]]:
        """gid -> the channels it is in (sorted), for every local member."""
        counter = self._counter()
        cached = self._channels
        if cached is not None and counter is not None:
            return cached
        found: dict[str, list[str]] = {}
        with self._connect() as db:
            for row in db.execute("SELECT channel, gid FROM memberships ORDER BY channel"):
                found.setdefault(row["gid"], []).append(row["channel"])
        result = {gid: tuple(names) for gid, names in found.items()}
        if counter is not None:
            with self._lock:
                if self._cached_at == counter:
                    self._channels = result
        return result

    def channels_of(self, gid: str) -> tuple[str, ...]:
        return self.channels().get(gid, ())

    def is_member(self, channel: str, gid: str) -> bool:
        return channel in self.channels_of(gid)

    def get(self, gid: str) -> Entity | None:
        key = gid.lower()
        counter = self._counter()
        cached = self._by_gid.get(key, _MISSING)
        if cached is not _MISSING and counter is not None:
            return cached  # type: ignore[return-value]
        with self._connect() as db:
            row = db.execute("SELECT * FROM entities WHERE gid = ?", (key,)).fetchone()
        entity = self._entity(row) if row else None
        if counter is not None:
            with self._lock:
                if self._cached_at == counter:  # else the database changed meanwhile
                    self._by_gid[key] = entity
        return entity

    def all(self) -> list[Entity]:
        counter = self._counter()
        cached = self._all
        if cached is not None and counter is not None:
            return list(cached)
        with self._connect() as db:
            rows = db.execute("SELECT * FROM entities ORDER BY created").fetchall()
        entities = [self._entity(row) for row in rows]
        if counter is not None:
            with self._lock:
                if self._cached_at == counter:
                    self._all = tuple(entities)
        return entities

    def resolve(self, target: str) -> Entity:
        """A local entity by gid, unique gid prefix (≥ 8 chars) or label."""
        target = target.strip()
        entity = self.get(target)
        if entity:
            return entity
        matches = [e for e in self.all() if e.label == target]
        if not matches and len(target) >= 8:
            matches = [e for e in self.all() if e.gid.startswith(target.lower())]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            listing = ", ".join(f"{e.label} ({gids.short(e.gid)})" for e in matches)
            raise Ambiguous(f"{target!r} matches several entities on this host: {listing}", "use the full gid")
        raise NotFound(
            f"no entity {target!r} is registered on this host",
            "see `bridge entities`, or register it with `bridge register`",
        )


def default_path() -> Path:
    from bridgecli import paths

    return paths.data_dir() / "entities.db"


def open_registry() -> Registry:
    return Registry(default_path())


def check_deliver(spec: str) -> tuple[str, str | None]:
    """Split ``BACKEND[:ADDRESS]`` and check the backend exists and accepts the address."""
    backend, _, address = spec.partition(":")
    if not backend:
        raise ConfigError(f"bad --deliver {spec!r}", "use BACKEND[:ADDRESS], e.g. hold or tmux:%3")
    return backend, (address or None)


__all__ = ["Registry", "Entity", "ROLES", "open_registry", "check_deliver", "BridgeError"]
