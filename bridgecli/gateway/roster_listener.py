"""The gateway's roster listener: ``roster.<host>`` consumed on a connection and thread of its
own, read in batches every :data:`BATCH_SECONDS`, so deliveries never wait behind the fleet's
heartbeats (docs/decisions/roster-listener-off-the-io-thread.md).

The queue is exclusive to this connection; when the connection drops, the listener
reconnects with the gateway's backoff policy and declares the queue again (heartbeats missed
meanwhile come again within one interval: presence is soft state, docs/design.md#invariant-8).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pika.exceptions

from bridgecli.amqp import connection as amqp_conn
from bridgecli.amqp import topology
from bridgecli.amqp.stepped import SteppedConnection
from bridgecli.gateway import log as glog
from bridgecli.gateway.reconnect import keep_connected

if TYPE_CHECKING:
    from bridgecli.config import Config

logger = logging.getLogger("bridgecli.gateway")

#: how long frames may wait in the socket before they are decoded together
BATCH_SECONDS = 0.1
#: how long opening the channel and starting the consumer may take
OPEN_TIMEOUT = 10.0
_BROKEN = amqp_conn.CONNECTION_ERRORS + (pika.exceptions.AMQPError,)


class RosterListener:
    """Feeds every frame of ``roster.<host>`` to ``on_frame(method, body)`` from its own thread;
    ``on_connected()`` runs after each (re)connect, once the consumer is in place."""

    def __init__(
        self,
        config: Config,
        host: str,
        on_frame: Callable[[Any, bytes], None],
        on_connected: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.host = host
        self.on_frame = on_frame
        self.on_connected = on_connected
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._connection: SteppedConnection | None = None
        self._broken = False
        self._thread = threading.Thread(target=self._run, name="roster-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def is_started(self) -> bool:
        return self._thread.ident is not None

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        keep_connected(
            self._stop, "roster listener", connect=self._connect, serve=self._serve, close=self._close, lost=_BROKEN
        )

    def _serve(self) -> None:
        while not self._stop.is_set() and not self._broken:
            assert self._connection is not None
            self._connection.process_data_events(time_limit=0)
            self._stop.wait(BATCH_SECONDS)

    def _connect(self) -> None:
        connection = SteppedConnection(self.config, name=f"bridge-gateway-{self.host}-roster")
        try:
            declaring = connection.sync_channel(OPEN_TIMEOUT, "roster declare")
            topology.declare(declaring, topology.roster_queue(self.host))
            declaring.close()
            self._consume(connection)
        except BaseException:
            connection.close()
            raise
        self._connection, self._broken = connection, False
        self.connected.set()
        self.on_connected()

    def _consume(self, connection: SteppedConnection) -> None:
        """Consume on an *asynchronous* channel: its callback runs straight from the I/O loop,
        where a BlockingChannel would wrap each delivery into an event to queue and dispatch —
        at hundreds of frames a second, more work than the frame itself."""
        channel = connection.channel(OPEN_TIMEOUT, "roster")
        channel.add_on_close_callback(self._on_channel_closed)
        started: list[Any] = []
        channel.basic_consume(
            topology.roster_queue(self.host).name,
            lambda _ch, method, _props, body: self.on_frame(method, body),
            auto_ack=True,
            callback=self._on_consuming(connection.arrived(started)),
        )
        connection.wait_for(started, OPEN_TIMEOUT, "the broker did not start the roster consumer")

    def _on_consuming(self, then: Callable[[Any], None]) -> Callable[[Any], None]:
        """Consume-ok: connected from here, since frames can follow in the same pump that
        delivers it, before ``_connect`` returns; ``then`` ends the wait for it."""

        def consuming(frame: Any) -> None:
            self.connected.set()
            then(frame)

        return consuming

    def _on_channel_closed(self, channel: Any, reason: Exception) -> None:
        if not self._stop.is_set():
            glog.event(logger, "roster channel closed", logging.WARNING, reason=str(reason))
        self._broken = True  # the loop reconnects

    def _close(self) -> None:
        self.connected.clear()
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:
                pass  # closing a connection that is already gone
