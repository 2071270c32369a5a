"""A cluster hub's records replicated through the broker, so that any node's registrar can serve.

Every node machine runs a registrar, one active at a time. After each change it publishes
the whole (small) database, numbered in ``x-hub-version`` and confirmed, to the quorum queue
``bridge.hub.state`` (the newest copy, read at starts), then announces it on the
``bridge.hub.copies`` fanout, heard by each running registrar. An answer is sent only after
its copy is confirmed, so an answered grant survives the machine that gave it. A copy met by
changes not yet published is merged with them (:mod:`~bridgecli.hub.records_merge`). Why:
docs/decisions/hub-records-replica.md."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from bridgecli.config_edit import atomic_write
from bridgecli.errors import BrokerUnavailable, CannotWrite
from bridgecli.hub.records_merge import holds, merge_into

logger = logging.getLogger("bridgecli.hub.registrar")
#: the quorum queue keeping the newest copy (published to, confirmed)
STATE_QUEUE = "bridge.hub.state"
#: the fanout that tells running registrars of each copy (published to without confirms: a
#: queue of a registrar whose node just died is still routed to, and would nack it)
COPIES_EXCHANGE = "bridge.hub.copies"
VERSION_HEADER = "x-hub-version"
#: the copy a copy was built on (its :func:`copy_id`): the base to merge it on
PARENT_HEADER = "x-hub-parent"
#: copies a registrar remembers having taken in, to find a parent among them (a copy is
#: the whole database: a few, not many)
KNOWN_COPIES = 4
#: ``bridge.hub.state`` (the queue): replicated, and only the newest copy is kept
STATE_ARGUMENTS: dict[str, Any] = {"x-queue-type": "quorum", "x-max-length": 1, "x-overflow": "drop-head"}
#: messages a peek reads at most (the queue keeps one, rarely two for a moment)
PEEK_MAX = 4
#: peeks at a registrar's start before it takes the queue for empty: another registrar's
#: start-time peek holds the copy for a few milliseconds
EMPTY_PEEKS = 3
#: how long a refused (nacked) copy is published again, and the pause between tries
NACK_RETRY_SECONDS = 10.0
NACK_PAUSE = 0.2
#: ``bridge.registrar`` on a cluster hub: replicated, one registrar served at a time
REGISTRAR_ARGUMENTS: dict[str, Any] = {"x-queue-type": "quorum", "x-single-active-consumer": True}


def snapshot(db: sqlite3.Connection) -> bytes:
    """The database behind ``db`` as bytes that load anywhere: its WAL flag cleared, since
    an in-memory copy cannot be in WAL mode."""
    data = bytearray(db.serialize())
    data[18:20] = b"\x01\x01"  # file format versions: legacy (rollback journal)
    return bytes(data)


def load(db: sqlite3.Connection, data: bytes) -> None:
    """Replace the contents of ``db`` (and its file) with the :func:`snapshot` ``data``."""
    copy = sqlite3.connect(":memory:")
    try:
        copy.deserialize(data)
        copy.backup(db)
    finally:
        copy.close()


def _version(props: Any) -> int:
    raw = (getattr(props, "headers", None) or {}).get(VERSION_HEADER, 0)
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else 0


def _parent(props: Any) -> str | None:
    raw = (getattr(props, "headers", None) or {}).get(PARENT_HEADER)
    if isinstance(raw, bytes):
        raw = raw.decode("ascii", "replace")
    return raw if isinstance(raw, str) else None


def copy_id(body: bytes) -> str:
    """A copy's name: the start of its SHA-256."""
    return hashlib.sha256(body).hexdigest()[:32]


class StateReplica:
    """The link between one registrar's database ``db`` and ``bridge.hub.state``. It knows
    the version it holds, the newest copy heard, and whether the file changed since (its own
    writes or another process's, such as ``bridge hub`` commands). Only the hub machine's
    (``origin``) publishes records it never loaded. Two copies given one number are merged
    on the copy both started from. ``base_file`` keeps the last copy loaded or published,
    so that changes never published before a restart are merged at the next start, not
    loaded over."""

    def __init__(self, db: sqlite3.Connection, origin: bool = True, base_file: Path | None = None) -> None:
        self.db = db
        self.origin = origin
        self.base_file = base_file
        self.version = 0  # 0: nothing loaded nor published yet
        self.newest: tuple[int, bytes] | None = None  # the newest copy heard, loaded or not
        self.newest_parent: str | None = None  # the copy it names as built on
        self.base: bytes | None = None  # the copy numbered ``version``, as loaded or published
        self.parent: bytes | None = None  # the copy our own ``version`` was published on top of
        self.rival: tuple[bytes, str | None] | None = None  # another's copy numbered like ours, its parent
        self.known: OrderedDict[str, bytes] = OrderedDict()  # copies taken in, newest last
        self._tell: Any = None  # the channel copies are announced on (see listen)
        self._confirm: Any = None  # the confirm channel a refused copy was published again on
        self._mark = self._now()
        self._restore_base()

    def _restore_base(self) -> None:
        """Take the last copy from ``base_file``; when the database differs from it, this
        machine holds changes it never published, and :meth:`changed` says so."""
        if self.base_file is None or not self.base_file.exists():
            return
        try:
            base = self.base_file.read_bytes()
            unpublished = not holds(self.db, base)
        except (OSError, sqlite3.DatabaseError) as exc:
            logger.warning("ignored the last copy of the hub records in %s: %s", self.base_file, exc)
            return
        self.base = base
        self._took(base)
        if unpublished:
            self._mark = (-1, -1)
            logger.info("the hub records hold changes not yet published; they will be merged")

    def _set_base(self, body: bytes) -> None:
        self.base = body
        if self.base_file is None:
            return
        try:
            atomic_write(self.base_file, body, 0o600)
        except CannotWrite as exc:  # only a later start's merge needs it: serve on
            logger.warning("could not keep the last copy of the hub records: %s", exc.message)

    def _now(self) -> tuple[int, int]:
        return self.db.total_changes, int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def changed(self) -> bool:
        """True when the database was written since it was last loaded or published."""
        return self._now() != self._mark

    @staticmethod
    def declare(channel: Any) -> None:
        """Declare the queue keeping the newest copy and the copies' fanout (as the node's
        admin: no host may touch them)."""
        channel.queue_declare(STATE_QUEUE, durable=True, arguments=STATE_ARGUMENTS)
        channel.exchange_declare(COPIES_EXCHANGE, "fanout", durable=True)

    def listen(self, channel: Any) -> None:
        """Hear every copy published from now on, in a queue of this connection's own: the
        connection's event loop hands them to :meth:`heard`. ``channel`` (no confirms) also
        tells the others of this registrar's copies."""
        queue = channel.queue_declare("", exclusive=True, auto_delete=True).method.queue
        channel.queue_bind(queue, COPIES_EXCHANGE)
        channel.basic_consume(queue, self.heard, auto_ack=True)
        self._tell, self._confirm = channel, None

    def heard(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        """One copy: kept when it is the newest heard, or a rival of our own."""
        self._keep(_version(props), body, _parent(props))

    def _keep(self, version: int, body: bytes, parent: str | None = None) -> None:
        taken = copy_id(body) in self.known  # ours coming back, or one taken in already
        if not taken and version == self.version and self.parent is not None:
            self.rival = (body, parent)  # published by another registrar at the same moment as ours
        elif self.newest is None or version > self.newest[0]:
            self.newest, self.newest_parent = (version, body), parent

    def _took(self, body: bytes) -> None:
        """Remember ``body`` as taken in (loaded, merged or published)."""
        name = copy_id(body)
        self.known[name] = body
        self.known.move_to_end(name)
        while len(self.known) > KNOWN_COPIES:
            self.known.popitem(last=False)

    def _base_of(self, parent: str | None, fallback: bytes) -> bytes:
        """The copy to merge a copy on: the one it was built on when we took that in."""
        return self.known.get(parent or "", fallback)

    @staticmethod
    def peek(channel: Any) -> tuple[int, bytes] | None:
        """(version, snapshot) of the newest copy in the queue, left there; None when there is
        none. Reads up to :data:`PEEK_MAX` messages: a copy returned by another registrar's
        peek can sit beside a newer one for a moment."""
        best: tuple[int, bytes] | None = None
        last = None
        for _ in range(PEEK_MAX):
            method, props, body = channel.basic_get(STATE_QUEUE, auto_ack=False)
            if method is None:
                break
            last = method.delivery_tag
            if best is None or _version(props) > best[0]:
                best = (_version(props), body)
        if last is not None:
            channel.basic_nack(last, multiple=True, requeue=True)
        return best

    def pull(self) -> bool:
        """Take in the newest copy heard when it is newer than ours (True): loaded, or merged
        with our changes not yet published, which :meth:`changed` then still reports. A
        rival copy of our own number is merged on top of the copy both started from."""
        if self.rival is not None:
            (rival, built_on), self.rival = self.rival, None
            if self.parent is not None and self._merge(self._base_of(built_on, self.parent), rival) is not None:
                self._took(rival)
                logger.info("merged another registrar's copy %d of the hub records", self.version)
        if self.newest is None or self.newest[0] <= self.version:
            return False
        version, body = self.newest
        base = self._base_of(self.newest_parent, self.base) if self.base is not None else None
        if self.changed() and base is not None and self._merge(base, body) is not None:
            logger.info("merged version %d of the hub records with changes made here", version)
            if holds(self.db, body):  # ours were in it already: nothing left to publish
                self._mark = self._now()
        else:
            load(self.db, body)
            self._mark = self._now()
            logger.info("loaded the hub records, version %d", version)
        self.version, self.parent = version, None
        self._set_base(body)
        self._took(body)
        return True

    def _merge(self, base: bytes, theirs: bytes) -> int | None:
        """:func:`~bridgecli.hub.records_merge.merge_into` the database; None when the two
        cannot be merged (rows that break a unique constraint): ``theirs`` is then loaded."""
        try:
            return merge_into(self.db, base, theirs)
        except sqlite3.DatabaseError as exc:
            logger.warning("could not merge the hub records (%s); the other copy replaces local changes", exc)
            return None

    def push(self, channel: Any, retry_for: float = NACK_RETRY_SECONDS) -> None:
        """Publish our database as the next version to the queue; ``channel`` is in confirm
        mode, so this returns once the cluster has it (a nack or return is retried for
        ``retry_for`` seconds, then raised). Then tell the running registrars (see :meth:`listen`)."""
        import pika
        import pika.exceptions

        self.pull()  # a copy heard since the last pull: ours goes on top of it
        version = max(self.version, self.newest[0] if self.newest else 0) + 1
        mark = self._now()
        body = snapshot(self.db)
        headers: dict[str, Any] = {VERSION_HEADER: version}
        if self.base is not None:
            headers[PARENT_HEADER] = copy_id(self.base)
        props = pika.BasicProperties(delivery_mode=2, headers=headers)
        if self._confirm is not None and self._confirm.is_open:
            channel = self._confirm
        deadline = time.monotonic() + retry_for
        while True:
            try:
                channel.basic_publish("", STATE_QUEUE, body, props, mandatory=True)
                break
            except (pika.exceptions.NackError, pika.exceptions.UnroutableError):  # refused or not there yet
                if time.monotonic() >= deadline:
                    raise
                logger.warning("the broker refused copy %d of the hub records; publishing it again", version)
                time.sleep(NACK_PAUSE)
                channel = self._reopen(channel)
        self.version, self._mark = version, mark
        self.parent = self.base
        self._set_base(body)
        self._took(body)
        if self._tell is not None:
            self._tell.basic_publish(COPIES_EXCHANGE, "", body, props)

    def _reopen(self, channel: Any) -> Any:
        """A new confirm channel in place of ``channel``, kept for later pushes: a quorum
        queue's client in a channel can keep sending to a leader that died, and nack each
        copy, while a new channel finds the new leader."""
        import pika.exceptions

        replacement = channel.connection.channel()
        replacement.confirm_delivery()
        try:
            channel.close()
        except pika.exceptions.AMQPError:  # already closed: dropped either way
            pass
        self._confirm = replacement
        return replacement

    def start(self, channel: Any, pause: float = 0.2) -> None:
        """At a registrar's (re)connect, after :meth:`listen`: load the newest copy kept in
        the queue; with none, the hub machine's publishes its own, and a node's raises
        BrokerUnavailable (it must not serve yet)."""
        for attempt in range(EMPTY_PEEKS):
            head = self.peek(channel)
            if head is not None:
                self._keep(*head)
                break
            if attempt < EMPTY_PEEKS - 1:
                time.sleep(pause)
        if self.pull() or (self.newest is not None and self.newest[0] == self.version):
            return
        if not self.origin and self.version == 0:
            raise BrokerUnavailable(
                "no copy of the hub's records in bridge.hub.state yet", "start the hub machine: `bridge hub start`"
            )
        self.push(channel)

    def sync(self, channel: Any) -> None:
        """Once a second: take in a newer copy, then publish what changed here (a request's
        grant, another process's write, a merge) on top of it."""
        self.pull()
        if self.changed() and (self.origin or self.version > 0):
            self.push(channel)
