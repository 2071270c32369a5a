"""A cluster hub's records replicated through the broker, so that any node's registrar can serve.

Every node machine runs a registrar; ``bridge.registrar`` is a quorum queue with one active
consumer, so the broker switches registrars when the active one's connection dies. After
each change the registrar publishes the whole (small) database, confirmed, to
``bridge.hub.state``, a stream numbered in ``x-hub-version``; every registrar hears the
stream and loads a newer copy before each request. An answer is sent only after its copy
is confirmed, so an answered grant survives the loss of the machine that gave it. Why a
stream: docs/decisions/hub-records-in-a-stream.md."""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any

from bridgecli.errors import BrokerUnavailable

logger = logging.getLogger("bridgecli.hub.registrar")
STATE_QUEUE = "bridge.hub.state"
VERSION_HEADER = "x-hub-version"
#: ``bridge.hub.state``: a replicated stream; old copies go with whole segments past 64 MiB
STATE_ARGUMENTS: dict[str, Any] = {
    "x-queue-type": "stream",
    "x-max-length-bytes": 64 << 20,
    "x-stream-max-segment-size-bytes": 8 << 20,
}
#: copies in flight to one listener (a stream consumer needs a prefetch)
PREFETCH = 8
#: seconds a registrar at start waits to hear the stream's last copy before taking the
#: stream for empty (a stream reports no length over AMQP 0-9-1)
FIRST_COPY_WAIT = 2.0
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


class StateReplica:
    """The link between one registrar's database ``db`` and ``bridge.hub.state``. It knows
    the version it holds, the newest copy heard, and whether the file changed since (its own
    writes or another process's, such as the hub machine's ``bridge hub`` commands). Only
    the hub machine's (``origin``) publishes records it never loaded: a node's empty copy
    never replaces them."""

    def __init__(self, db: sqlite3.Connection, origin: bool = True) -> None:
        self.db = db
        self.origin = origin
        self.version = 0  # 0: nothing loaded nor published yet
        self.newest: tuple[int, bytes] | None = None  # the newest copy heard, loaded or not
        self._mark = self._now()

    def _now(self) -> tuple[int, int]:
        return self.db.total_changes, int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def changed(self) -> bool:
        """True when the database was written since it was last loaded or published."""
        return self._now() != self._mark

    @staticmethod
    def declare(channel: Any) -> None:
        """Declare ``bridge.hub.state`` (as the node's admin: no host may touch it)."""
        channel.queue_declare(STATE_QUEUE, durable=True, arguments=STATE_ARGUMENTS)

    def listen(self, channel: Any) -> None:
        """Hear every copy from the stream's last one on, through ``channel`` (its own):
        the connection's event loop delivers them to :meth:`heard`."""
        channel.basic_qos(prefetch_count=PREFETCH)
        channel.basic_consume(STATE_QUEUE, self.heard, arguments={"x-stream-offset": "last"})

    def heard(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        """One copy from the stream: kept when it is the newest heard."""
        version = _version(props)
        if self.newest is None or version > self.newest[0]:
            self.newest = (version, body)
        channel.basic_ack(method.delivery_tag)  # a stream takes no automatic acks

    def pull(self) -> bool:
        """Load the newest copy heard when it is newer than ours; True when it was loaded. A
        local change not yet published is overwritten by it (logged): the copy holds grants."""
        if self.newest is None or self.newest[0] <= self.version:
            return False
        if self.changed():
            logger.warning("a local change to the hub records was overwritten by version %d", self.newest[0])
        load(self.db, self.newest[1])
        self.version, self._mark = self.newest[0], self._now()
        logger.info("loaded the hub records, version %d", self.version)
        return True

    def push(self, channel: Any) -> None:
        """Publish our database as the next version; ``channel`` is in confirm mode, so this
        returns once the cluster has it (raises when the broker refuses it)."""
        import pika

        version = max(self.version, self.newest[0] if self.newest else 0) + 1
        mark = self._now()
        channel.basic_publish(
            "",
            STATE_QUEUE,
            snapshot(self.db),
            pika.BasicProperties(delivery_mode=2, headers={VERSION_HEADER: version}),
            mandatory=True,
        )
        self.version, self._mark = version, mark

    def start(self, connection: Any, channel: Any, wait: float = FIRST_COPY_WAIT) -> None:
        """At a registrar's (re)connect, after :meth:`listen`: load the newest copy; with none
        heard in ``wait`` seconds the hub machine's publishes its own, and a node's raises
        BrokerUnavailable (it must not serve yet)."""
        deadline = time.monotonic() + wait
        while self.newest is None and time.monotonic() < deadline:
            connection.process_data_events(time_limit=0.05)
        if self.pull() or (self.newest is not None and self.newest[0] == self.version):
            return
        if not self.origin and self.version == 0:
            raise BrokerUnavailable(
                "no copy of the hub's records in bridge.hub.state yet", "start the hub machine: `bridge hub start`"
            )
        self.push(channel)

    def sync(self, channel: Any) -> None:
        """Once a second: load a newer copy, else publish a change written by another process."""
        if not self.pull() and self.changed() and (self.origin or self.version > 0):
            self.push(channel)
