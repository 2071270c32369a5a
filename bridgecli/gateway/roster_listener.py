"""The gateway's roster listener: ``roster.<host>`` consumed on a connection and thread of its
own, read in batches every :data:`BATCH_SECONDS`, so deliveries never wait behind the fleet's
heartbeats (docs/decisions/roster-listener-off-the-io-thread.md).

The queue is exclusive to this connection; when the connection drops, the listener
reconnects with the gateway's backoff policy and declares the queue again (heartbeats missed
meanwhile come again within one interval: presence is soft state, docs/design.md#invariant-8).
The queue is bound ``roster.#`` (every host directly) and, with a roster relay, ``relay.#``;
the listener's own thread binds and unbinds ``roster.#`` as its owner asks
(:meth:`RosterListener.hear_directly`, docs/roster.md#the-roster-relay).
"""

from __future__ import annotations

import dataclasses
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
#: the bindings of every host's frames and of relay frames on ``bridge.roster``
DIRECT_KEY, RELAY_KEY = "roster.#", "relay.#"


class RosterListener:
    """Feeds every frame of ``roster.<host>`` to ``on_frame(method, body)`` from its own thread;
    ``on_connected()`` runs after each (re)connect, once the consumer is in place. ``relay``
    (``roster.relay``): ``off`` binds only ``roster.#``; ``auto`` and ``only`` bind ``relay.#``
    too, and ``roster.#`` while :attr:`direct` (False from the start with ``only``). A broker
    that refuses ``relay.#`` (403) is logged once; then every host is heard directly."""

    def __init__(
        self,
        config: Config,
        host: str,
        on_frame: Callable[[Any, bytes], None],
        on_connected: Callable[[], None] = lambda: None,
        relay: str = "off",
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
        self.relay = relay
        #: hear every host directly (``roster.#`` bound)? What the owner asks; and what is bound
        self.direct = relay != "only"
        self._bound_direct: bool | None = None
        #: the broker refused binding ``relay.#`` (an older hub's permissions)
        self.relay_refused = False
        self._binder: Any = None

    def hear_directly(self, direct: bool) -> None:
        """Bind (True) or unbind ``roster.#``; done by the listener's thread within a batch."""
        self.direct = direct

    @property
    def bound_direct(self) -> bool:
        """Is ``roster.#`` bound on the current connection's queue?"""
        return bool(self._bound_direct)

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
            self._connection.process_ready()
            if self._binder is not None and self._direct_wanted() != self._bound_direct:
                self._bind_direct(self._binder, self._direct_wanted())
            self._stop.wait(BATCH_SECONDS)

    def _direct_wanted(self) -> bool:
        return self.direct or self.relay_refused or self.relay == "off"

    def _bind_direct(self, channel: Any, direct: bool) -> None:
        queue = topology.roster_queue(self.host).name
        if direct:
            channel.queue_bind(queue, topology.ROSTER, routing_key=DIRECT_KEY)
        elif self._bound_direct:
            channel.queue_unbind(queue, topology.ROSTER, routing_key=DIRECT_KEY)
        if self._bound_direct is not None and direct != self._bound_direct:
            glog.event(logger, "roster listener hears every host" + (" directly" if direct else " through the relay"))
        self._bound_direct = direct

    def _declare(self, connection: SteppedConnection) -> None:
        """Declare our queue with the bindings asked: ``relay.#`` first (its own channel: a
        403 closes it), then ``roster.#`` unless the relay alone is to be heard."""
        queue = topology.roster_queue(self.host)
        declaring = connection.sync_channel(OPEN_TIMEOUT, "roster declare")
        topology.declare(declaring, dataclasses.replace(queue, bindings=()))
        declaring.close()
        if self.relay != "off" and not self.relay_refused:
            relaying = connection.sync_channel(OPEN_TIMEOUT, "roster relay bind")
            try:
                relaying.queue_bind(queue.name, topology.ROSTER, routing_key=RELAY_KEY)
                relaying.close()
            except pika.exceptions.ChannelClosedByBroker as exc:
                if exc.reply_code != 403:
                    raise
                self.relay_refused = True
                glog.event(
                    logger,
                    "the broker refused binding relay.# (a hub older than the roster relay?): "
                    "hearing every host directly",
                    logging.WARNING,
                    error=exc.reply_text,
                )
        self._bound_direct = None
        self._binder = connection.sync_channel(OPEN_TIMEOUT, "roster bind")
        self._bind_direct(self._binder, self._direct_wanted())

    def _connect(self) -> None:
        connection = SteppedConnection(self.config, name=f"bridge-gateway-{self.host}-roster")
        try:
            self._declare(connection)
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
        self._binder = None
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:
                pass  # closing a connection that is already gone
