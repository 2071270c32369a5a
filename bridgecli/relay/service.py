"""The roster relay's pika shell (docs/roster.md#the-roster-relay): consumes
``bridge.roster.relay`` and publishes what :class:`~bridgecli.relay.core.RelayCore` decides.

One connection on the calling thread, stepped (:mod:`bridgecli.amqp.stepped`); reconnects
with the gateway's backoff (:func:`bridgecli.gateway.reconnect.keep_connected`). Relay frames
go on ``bridge.roster`` under ``relay.<name>``, sync answers on ``bridge.ctl`` under the
requester's reply key: non-persistent, expiring after 3 s, naming the connection's broker user.
Run by ``bridge relay`` and by the hub's registrar.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pika
import pika.exceptions

from bridgecli.amqp import connection as amqp_conn
from bridgecli.amqp import topology
from bridgecli.amqp.stepped import SteppedConnection
from bridgecli.gateway.identity import IdentityPolicy
from bridgecli.gateway.reconnect import keep_connected
from bridgecli.relay.core import RelayCore
from bridgecli.relay_frames import RELAY_EVERY, relay_key

if TYPE_CHECKING:
    from bridgecli.config import Config

logger = logging.getLogger("bridgecli.relay")

#: how long opening a channel and starting the consumer may take
OPEN_TIMEOUT = 10.0
#: the longest step of the loop between two looks at the clock
STEP_SECONDS = 0.05
#: what a relay frame and an answer expire after, in milliseconds
EXPIRATION_MS = "3000"
_LOST = amqp_conn.CONNECTION_ERRORS + (pika.exceptions.AMQPError,)


class RelayService:
    """Relay ``name`` on the broker of ``config``, publishing every ``every`` seconds while it
    is fed. ``policy`` judges frames (default: the config's ``security.*`` settings).
    :meth:`run` serves until its event is set; :meth:`start` does so on a daemon thread."""

    def __init__(
        self,
        config: Config,
        name: str,
        every: float = RELAY_EVERY,
        *,
        policy: IdentityPolicy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.name = name
        self.every = every
        self.clock = clock
        self.core = RelayCore(name, policy or IdentityPolicy.from_config(config.values), clock, every=every)
        self.user_id = amqp_conn.username(config)
        #: set while consuming
        self.serving = threading.Event()
        self.published = 0
        self._connection: SteppedConnection | None = None
        self._channel: Any = None
        self._broken = False
        self._stop = threading.Event()

    def start(self, stop: threading.Event) -> threading.Thread:
        """:meth:`run` on a daemon thread named ``relay``."""
        thread = threading.Thread(target=self.run, args=(stop,), name="relay", daemon=True)
        thread.start()
        return thread

    def run(self, stop: threading.Event) -> None:
        """Connect, consume and publish until ``stop`` is set (reconnecting meanwhile)."""
        self._stop = stop
        keep_connected(
            stop, "relay connection", connect=self._connect, serve=self._serve, close=self._close, lost=_LOST
        )

    def _connect(self) -> None:
        connection = SteppedConnection(self.config, name=f"bridge-relay-{self.name}")
        try:
            topology.ensure_shared(
                lambda: connection.sync_channel(OPEN_TIMEOUT, "relay declare"),
                self.config.values.get("messaging.inbox_queue_type") or "classic",
                joined=bool(self.config.values.get("hub.id")),
            )
            declaring = connection.sync_channel(OPEN_TIMEOUT, "relay declare")
            topology.declare(declaring, topology.relay_queue())
            declaring.close()
            channel = connection.channel(OPEN_TIMEOUT, "relay")
            channel.add_on_close_callback(self._on_channel_closed)
            self.core.new_epoch()
            started: list[Any] = []
            channel.basic_consume(
                topology.relay_queue().name,
                self._on_delivery,
                auto_ack=True,
                callback=connection.arrived(started),
            )
            connection.wait_for(started, OPEN_TIMEOUT, "the broker did not start the relay consumer")
        except BaseException:
            connection.close()
            raise
        self._connection, self._channel, self._broken = connection, channel, False
        self.serving.set()
        logger.info("relay %s serving", self.name)

    def _on_delivery(self, _channel: Any, method: Any, props: Any, body: bytes) -> None:
        self.core.take(method, props, body, self.clock())

    def _on_channel_closed(self, _channel: Any, reason: Exception) -> None:
        if not self._stop.is_set():
            logger.warning("relay channel closed: %s", reason)
        self._broken = True

    def _serve(self) -> None:
        assert self._connection is not None
        next_tick = time.monotonic() + self.every
        while not self._stop.is_set() and not self._broken:
            self._connection.process_data_events(time_limit=STEP_SECONDS)
            now = self.clock()
            if time.monotonic() >= next_tick:
                next_tick += self.every
                if next_tick <= time.monotonic():  # after a stall: skip the missed ticks
                    next_tick = time.monotonic() + self.every
                for body in self.core.tick(now):
                    self._publish(topology.ROSTER, relay_key(self.name), body)
            for reply, bodies in self.core.due_answers(now):
                for body in bodies:
                    self._publish(topology.CONTROL, reply, body)

    def _publish(self, exchange: str, key: str, body: bytes) -> None:
        props = pika.BasicProperties(
            content_type="application/json", delivery_mode=1, expiration=EXPIRATION_MS, user_id=self.user_id
        )
        self._channel.basic_publish(exchange, key, body, props)
        self.published += 1

    def _close(self) -> None:
        self.serving.clear()
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            try:
                connection.close()
            except Exception:
                pass  # closing a connection that is already gone
