"""The gateway's publish lane: a second AMQP connection, owned by a thread of its own, that
carries every confirmed publish of a local sender (``bridge send`` and friends, MCP tools).

Why a second connection: pika's ``BlockingChannel.basic_publish`` in confirm mode blocks its
thread until the broker confirms, and for a persistent message into a durable inbox the
broker confirms only once the *consumer* acked it (or the message reached disk). On the I/O
thread that wait (2–5 ms: the other gateway's whole delivery) stopped all consuming — no
deliveries, no acks — so a reply arriving meanwhile, or the next request, queued behind it.
RabbitMQ also advises separate connections for publishing and consuming: when it applies flow
control to a fast publisher, a shared connection would hold back the consumer's acks too.

The lane reconnects by itself (same capped, jittered backoff as the gateway). Dead letters and
control-plane answers still go out on the consuming connection's own publisher, next to the
ack they belong with.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable

import pika
import pika.exceptions
import tenacity

from bridgecli.amqp import connection as amqp_conn
from bridgecli.amqp import topology
from bridgecli.amqp.publisher import Publisher
from bridgecli.errors import BrokerUnavailable
from bridgecli.gateway import log as glog
from bridgecli.gateway.reconnect import retry_until_stopped

if TYPE_CHECKING:
    from bridgecli.config import Config
    from bridgecli.envelope import Envelope

logger = logging.getLogger("bridgecli.gateway")

#: errors after which the lane's connection (or its channel) is no good any more
_BROKEN = amqp_conn.CONNECTION_ERRORS + (pika.exceptions.AMQPConnectionError, pika.exceptions.ChannelClosed)


class PublishLane:
    """Confirmed publishing on a connection and thread of its own. :meth:`publish` is called
    from any thread and returns once the broker confirmed (or raises the typed error)."""

    def __init__(self, config: Config, host: str, delay_mode: Callable[[], str]) -> None:
        self.config = config
        self.host = host
        self._delay_mode = delay_mode
        self.ready = threading.Event()
        self._stop = threading.Event()
        self._broken = False
        self._connection: pika.BlockingConnection | None = None
        self._publisher: Publisher | None = None
        self._delay_tiers: set[int] = set()
        self._pending: set[Future] = set()
        self._pending_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="bridge-publish", daemon=True)

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._thread.is_alive() or self._stop.is_set()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the publish in flight, close the connection, end the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                retry_until_stopped(self._connect, self._stop, "publish lane")
            except tenacity.RetryError:
                break
            if self._stop.is_set():
                break
            try:
                while not self._stop.is_set() and not self._broken:
                    assert self._connection is not None
                    self._connection.process_data_events(time_limit=0.2)
            except _BROKEN + (pika.exceptions.AMQPError,) as exc:
                glog.event(logger, "publish connection lost", logging.WARNING, error=f"{type(exc).__name__}: {exc}")
            self._close()
            if not self._stop.is_set():
                self._stop.wait(0.2)
        self._close()

    def _connect(self) -> None:
        connection = amqp_conn.connect(self.config, name=f"bridge-gateway-{self.host}-publish")
        username = connection._impl.params.credentials.username
        self._publisher = Publisher(connection.channel(), user_id=username)
        self._connection, self._broken = connection, False
        self._delay_tiers = set()
        self.ready.set()

    def _close(self) -> None:
        self.ready.clear()
        connection, self._connection, self._publisher = self._connection, None, None
        if connection is not None and connection.is_open:
            try:
                connection.close()
            except Exception:
                pass
        with self._pending_lock:  # queued on the dead connection: they would never run
            pending, self._pending = self._pending, set()
        for future in pending:
            if future.set_running_or_notify_cancel():
                future.set_exception(BrokerUnavailable("lost the broker connection before publishing",
                                                       "retry in a moment"))

    # --- publishing ---------------------------------------------------------------------

    def publish(self, envelopes: list[Envelope], delay_ms: int | None = None, timeout: float = 30.0) -> None:
        """Publish ``envelopes`` in order, each confirmed and mandatory; from any thread."""
        self._submit(lambda: self._publish_all(envelopes, delay_ms), timeout)

    def _publish_all(self, envelopes: list[Envelope], delay_ms: int | None) -> None:
        assert self._publisher is not None and self._connection is not None
        if delay_ms and self._delay_mode() != "plugin" and delay_ms not in self._delay_tiers:
            side = self._connection.channel()  # a declare that fails closes only this channel
            try:
                topology.declare(side, topology.delay_queue(delay_ms))
            finally:
                if side.is_open:
                    side.close()
            self._delay_tiers.add(delay_ms)
        for envelope in envelopes:
            self._publisher.publish(envelope, delay_ms=delay_ms)
            glog.event(logger, "sent", kind=envelope.kind, msg=envelope.msg_id, to=envelope.recipient,
                       delay_ms=delay_ms or 0)

    def _submit(self, fn: Callable[[], Any], timeout: float) -> Any:
        if not self.ready.wait(timeout=min(timeout, 5.0)):
            raise BrokerUnavailable("the gateway is not connected to the broker right now",
                                    "see the gateway's log; it reconnects by itself")
        future: Future = Future()

        def call() -> None:
            with self._pending_lock:
                self._pending.discard(future)
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:
                    if isinstance(exc, _BROKEN):
                        self._broken = True  # the loop reconnects
                    future.set_exception(exc)

        connection = self._connection
        if connection is None:
            raise BrokerUnavailable("the gateway lost its broker connection", "retry in a moment")
        with self._pending_lock:
            self._pending.add(future)
        try:
            connection.add_callback_threadsafe(call)
        except Exception:
            raise BrokerUnavailable("the gateway lost its broker connection", "retry in a moment") from None
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            future.cancel()
            with self._pending_lock:
                self._pending.discard(future)
            raise BrokerUnavailable("the gateway's broker connection is stalled", "retry in a moment") from None
        except _BROKEN as exc:
            raise BrokerUnavailable(f"lost the broker connection ({type(exc).__name__})",
                                    "retry in a moment") from None
