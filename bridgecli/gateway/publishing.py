"""The gateway's publish lane: a second AMQP connection, on the gateway's one loop, that
carries every confirmed publish of a local sender (``bridge send`` and friends, MCP tools).

Confirms are pipelined on an asynchronous confirm-mode channel: each caller's future resolves
on its own ``basic.ack`` (a ``basic.return`` before it makes it
:class:`~bridgecli.errors.Rejected`). The lane reconnects by itself; publishes in flight when
its connection dies fail with :class:`~bridgecli.errors.Unconfirmed` (the CLI resends them
with the same id; the receiver drops repeats). Dead letters and control answers stay on the consuming
connection, next to their ack. Why a connection of its own:
docs/decisions/publish-lane-on-its-own-connection.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pika
import pika.exceptions

from bridgecli.amqp import connection as amqp_conn
from bridgecli.amqp import topology
from bridgecli.amqp.publisher import amqp_message, describe, nacked, unroutable
from bridgecli.amqp.stepped import SteppedConnection, Stepper
from bridgecli.errors import BrokerUnavailable, Unconfirmed
from bridgecli.gateway import log as glog
from bridgecli.gateway.reconnect import RETRYABLE, backoff, log_retry

if TYPE_CHECKING:
    from bridgecli.config import Config
    from bridgecli.envelope import Envelope

logger = logging.getLogger("bridgecli.gateway")

#: errors after which the lane's connection (or its channel) is no good any more
_BROKEN = amqp_conn.CONNECTION_ERRORS + (
    pika.exceptions.AMQPConnectionError,
    pika.exceptions.ChannelClosed,
    pika.exceptions.ChannelWrongStateError,
)
#: errors that end the lane's connection
_LOST = _BROKEN + (pika.exceptions.AMQPError,)
#: how long opening the lane's channel and turning on confirms may take
OPEN_TIMEOUT = 10.0
#: after a nack, how long new publishes wait for the old channel's outstanding confirms
RENEW_DRAIN_TIMEOUT = 5.0


@dataclass
class _InFlight:
    """A published message waiting for its confirm."""

    future: Future
    envelope: Envelope
    exchange: str
    routing_key: str
    delay_ms: int | None
    returned: bool = False


class PublishLane:
    """Confirmed publishing on a connection of its own. :meth:`publish` is called from any
    thread but the loop's and returns once the broker confirmed every message (or raises the
    typed error of the first one that failed); :meth:`publish_in_loop` from the loop's thread.

    The thread that steps the lane's :class:`Stepper` calls :meth:`tend` between its steps;
    the lane connects at the first one after :meth:`open`. ``on_sent`` is told of each
    message the broker confirmed (loop thread)."""

    def __init__(
        self, config: Config, host: str, stepper: Stepper, on_sent: Callable[[Envelope], None] = lambda _: None
    ) -> None:
        self.config = config
        self.host = host
        self.on_sent = on_sent
        self.ready = threading.Event()
        #: the loop the lane's connection runs on, kept across connections; the thread that
        #: steps it also serves other sockets on it (the local API)
        self.stepper = stepper
        self._stop = threading.Event()
        self._open = False
        self._broken = False
        #: failed connect attempts in a row, and when the next one is due (monotonic)
        self._attempts = 0
        self._retry_at = 0.0
        self._connection: SteppedConnection | None = None
        #: the broker's product and version, read when the lane connects (``bridge status``)
        self.server_info: dict[str, Any] = {}
        self._channel: Any = None  #: pika.channel.Channel (asynchronous), in confirm mode
        self._plain: Any = None  #: a channel without confirms, for soft state (roster frames)
        self._user_id: str | None = None
        self._delay_tiers: set[int] = set()
        # loop thread only: published, waiting for their confirm (insertion order = tag order)
        self._in_flight: dict[int, _InFlight] = {}
        self._by_msg_id: dict[str, int] = {}
        self._next_tag = 1
        # submitted from other threads, not yet published by the loop thread
        self._queued: set[Future] = set()
        self._queued_lock = threading.Lock()
        # loop thread only: after a nack, publish on a fresh channel (see _renew_channel_after_nack)
        self._renew_since: float | None = None
        self._deferred: list[tuple[list[tuple[Envelope, Future]], int | None]] = []

    # --- lifecycle (the loop thread) ----------------------------------------------------

    def open(self) -> None:
        """Connect at the next :meth:`tend`, and reconnect whenever the connection is lost
        (called once the topology exists)."""
        self._open = True

    def stop(self) -> None:
        """Send what was queued last (a roster "gone"), then close the connection: publishes
        still in flight fail."""
        self._stop.set()
        if self._connection is not None and not self._broken:
            try:
                self._connection.process_data_events(time_limit=0)
            except _LOST:
                pass  # lost while stopping: nothing more to send
        self._close()

    def tend(self) -> None:
        """Between two steps of the loop: run the lane's queued calls, renew the channel after
        a nack, notice a lost connection, and (re)connect when due, with the reconnect policy
        of :mod:`.reconnect`. A connect attempt steps the loop while it waits for the broker."""
        if not self._open or self._stop.is_set():
            return
        if self._connection is None:
            if time.monotonic() >= self._retry_at:
                self._try_connect()
            return
        try:
            self._connection.run_calls()
            if self._renew_since is not None and not self._broken:
                try:
                    self._renew_channel_after_nack()
                except BrokerUnavailable as exc:  # no new channel: start over on a new connection
                    glog.event(logger, "publish channel renewal failed", logging.WARNING, error=str(exc))
                    self._broken = True
            if not self._broken:
                return
            error = "its channel closed"
        except _LOST as exc:
            error = f"{type(exc).__name__}: {exc}"
        glog.event(logger, "publish connection lost", logging.WARNING, error=error)
        self._close()
        self._retry_at = time.monotonic() + 0.2

    def _try_connect(self) -> None:
        try:
            self._connect()
        except RETRYABLE as exc:
            self._attempts += 1
            wait = backoff(self._attempts)
            self._retry_at = time.monotonic() + wait
            log_retry("publish lane", self._attempts, wait, exc)
        else:
            self._attempts = 0

    def _connect(self) -> None:
        connection = SteppedConnection(self.config, name=f"bridge-gateway-{self.host}-publish", stepper=self.stepper)
        try:
            self._channel = self._open_confirm_channel(connection)
        except BaseException:
            if connection.is_open:
                connection.close()
            raise
        self._user_id = amqp_conn.username(self.config)
        self._plain = connection.channel(OPEN_TIMEOUT, "soft publish")
        self.server_info = connection.server_info()
        info = self.server_info
        glog.event(logger, "publish lane connected", server=info.get("product"), version=info.get("version"))
        self._connection, self._broken = connection, False
        self._in_flight, self._by_msg_id, self._next_tag = {}, {}, 1
        self._delay_tiers = set()
        self._renew_since = None
        self.ready.set()

    def _open_confirm_channel(self, connection: SteppedConnection) -> Any:
        """An asynchronous channel on the lane's connection (which this thread drives), in
        confirm mode, with our ack/nack, return and close callbacks."""
        channel = connection.channel(OPEN_TIMEOUT, "publish")
        # a channel renewed after a nack may still answer late: only the current one counts
        channel.add_on_return_callback(lambda *args: self._on_return(*args) if channel is self._channel else None)
        channel.add_on_close_callback(self._on_channel_closed)
        confirming: list[Any] = []
        channel.confirm_delivery(
            lambda frame: self._on_confirm(frame) if channel is self._channel else None,
            callback=connection.arrived(confirming),
        )
        connection.wait_for(confirming, OPEN_TIMEOUT, "the broker did not turn on publisher confirms")
        return channel

    def _close(self) -> None:
        self.ready.clear()
        connection, self._connection, self._channel, self._plain = self._connection, None, None, None
        if connection is not None:
            try:
                connection.close()
            except Exception:
                pass  # closing a connection that is already gone
        lost = [entry.future for entry in self._in_flight.values()]
        lost.extend(future for batch, _ in self._deferred for _, future in batch)
        self._in_flight, self._by_msg_id, self._deferred, self._renew_since = {}, {}, [], None
        with self._queued_lock:  # submitted to the dead connection: they would never run
            lost.extend(self._queued)
            self._queued = set()
        for future in lost:
            _fail(
                future,
                Unconfirmed(
                    "lost the broker connection before the broker confirmed the message",
                    "it may or may not have been delivered: resend with the same --id or --key (a repeat is dropped)",
                ),
            )

    # --- publishing (any thread) --------------------------------------------------------

    def publish(self, envelopes: list[Envelope], delay_ms: int | None = None, timeout: float = 30.0) -> None:
        """Publish ``envelopes`` in order, mandatory, and wait for every confirm."""
        deadline = time.monotonic() + timeout
        for future in self.submit(envelopes, delay_ms=delay_ms, timeout=timeout):
            await_confirm(future, deadline)

    def submit(self, envelopes: list[Envelope], delay_ms: int | None = None, timeout: float = 30.0) -> list[Future]:
        """Hand ``envelopes`` to the loop thread and return one future per message, resolved
        by its confirm (or failed with its typed error) — for a caller that has something
        better to wait for, such as the reply that proves delivery (``send --wait``)."""
        if not envelopes:
            return []
        if not self.ready.wait(timeout=min(timeout, 5.0)):
            raise BrokerUnavailable(
                "the gateway is not connected to the broker right now", "see the gateway's log; it reconnects by itself"
            )
        connection = self._connection
        if connection is None:
            raise BrokerUnavailable("the gateway lost its broker connection", "retry in a moment")
        batch: list[tuple[Envelope, Future]] = [(envelope, Future()) for envelope in envelopes]
        with self._queued_lock:
            self._queued.update(future for _, future in batch)
        try:
            # out in the lane's current step: no step ends for it
            self.stepper.next_turn(lambda: self._publish_batch(batch, delay_ms, in_loop=True))
        except Exception:
            raise BrokerUnavailable("the gateway lost its broker connection", "retry in a moment") from None
        return [future for _, future in batch]

    def publish_in_loop(self, envelopes: list[Envelope], delay_ms: int | None = None) -> list[Future]:
        """:meth:`submit` for the loop's own thread, which publishes at once: no hand-off.
        BrokerUnavailable when the lane is not connected."""
        if not self.ready.is_set() or self._connection is None:
            raise BrokerUnavailable(
                "the gateway is not connected to the broker right now", "see the gateway's log; it reconnects by itself"
            )
        batch: list[tuple[Envelope, Future]] = [(envelope, Future()) for envelope in envelopes]
        self._publish_batch(batch, delay_ms, in_loop=True)
        return [future for _, future in batch]

    def send_soft(self, frames: list[tuple[str, str, bytes, pika.BasicProperties]]) -> bool:
        """Publish soft-state frames (exchange, routing key, body, properties) without confirms
        and without waiting; False when the lane is not connected (the frames are dropped —
        roster heartbeats are repeated every interval anyway).

        Roster heartbeats go here rather than on the consuming connection: RabbitMQ blocks a
        connection that publishes during a memory or disk alarm, and a blocked consuming
        connection could no longer ack — the gateway would stop draining the very queues whose
        backlog raised the alarm."""
        connection = self._connection
        if connection is None or not self.ready.is_set():
            return False
        try:
            self.stepper.next_turn(lambda: self._publish_soft(frames))
        except Exception:
            return False
        return True

    # --- the loop thread ----------------------------------------------------------------

    def _publish_soft(self, frames: list[tuple[str, str, bytes, pika.BasicProperties]]) -> None:
        plain = self._plain
        if plain is None or not plain.is_open:
            return
        try:
            for exchange, routing_key, body, properties in frames:
                plain.basic_publish(exchange, routing_key, body, properties)
        except _BROKEN:
            self._broken = True

    def _publish_batch(self, batch: list[tuple[Envelope, Future]], delay_ms: int | None, in_loop: bool = False) -> None:
        """Publish ``batch`` on the confirm channel; ``in_loop``: called inside the I/O loop,
        where declaring a delay tier (it waits for the broker) must wait for the next step."""
        if in_loop and delay_ms and delay_ms not in self._delay_tiers:  # a new tier: declare it first
            assert self._connection is not None
            self._connection.after_step(lambda: self._publish_batch(batch, delay_ms))
            return
        with self._queued_lock:
            self._queued.difference_update(future for _, future in batch)
        if self._renew_since is not None:  # for the fresh channel, once the old one is drained
            self._deferred.append((batch, delay_ms))
            return
        published = 0  # the first `published` of the batch are in flight
        try:
            if delay_ms and delay_ms not in self._delay_tiers:
                self._declare_delay_tier(delay_ms)
            for envelope, future in batch:
                exchange, routing_key, body, properties = amqp_message(envelope, self._user_id, delay_ms)
                self._channel.basic_publish(exchange, routing_key, body, properties, mandatory=True)
                tag, self._next_tag = self._next_tag, self._next_tag + 1
                self._in_flight[tag] = _InFlight(future, envelope, exchange, routing_key, delay_ms)
                self._by_msg_id[envelope.msg_id] = tag
                published += 1
        except Exception as exc:
            if isinstance(exc, _BROKEN) or self._channel is None:
                self._broken = True  # the loop reconnects; _close fails what is in flight
            # a write cut off by a lost connection may still have reached the broker
            lost = Unconfirmed if isinstance(exc, _BROKEN) else BrokerUnavailable
            error = (
                exc
                if isinstance(exc, BrokerUnavailable)
                else lost(f"publishing failed ({type(exc).__name__}: {exc})", "retry in a moment")
            )
            for _, future in batch[published:]:
                _fail(future, error)

    def _declare_delay_tier(self, delay_ms: int) -> None:
        assert self._connection is not None
        side = self._connection.sync_channel(OPEN_TIMEOUT, "declare")  # a failed declare closes only it
        try:
            topology.declare(side, topology.delay_exchange(self.host), topology.delay_queue(self.host, delay_ms))
        finally:
            if side.is_open:
                side.close()
        self._delay_tiers.add(delay_ms)

    def _on_return(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        """``basic.return``: nobody could receive it; its ack follows."""
        tag = self._by_msg_id.get(getattr(properties, "message_id", None) or "")
        if tag is not None and tag in self._in_flight:
            self._in_flight[tag].returned = True

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        ok = isinstance(method, pika.spec.Basic.Ack)
        if method.multiple:
            tags = []
            for tag in self._in_flight:  # insertion order is tag order
                if tag > method.delivery_tag:
                    break
                tags.append(tag)
        else:
            tags = [method.delivery_tag] if method.delivery_tag in self._in_flight else []
        if not ok and tags and self._renew_since is None:
            self._renew_since = time.monotonic()
        for tag in tags:
            entry = self._in_flight.pop(tag)
            self._by_msg_id.pop(entry.envelope.msg_id, None)
            if not ok:
                _fail(entry.future, nacked(describe(entry.envelope)))
            elif entry.returned:
                _fail(entry.future, unroutable(describe(entry.envelope), entry.exchange, entry.routing_key))
            else:
                if not entry.future.done():
                    entry.future.set_result(None)
                self.on_sent(entry.envelope)
                glog.event(
                    logger,
                    "sent",
                    kind=entry.envelope.kind,
                    msg=entry.envelope.msg_id,
                    to=entry.envelope.recipient,
                    delay_ms=entry.delay_ms or 0,
                )

    def _renew_channel_after_nack(self) -> None:
        """Publish on a fresh confirm channel after the broker nacked a message (loop thread).

        New publishes wait until the old channel's confirms are all in, so no other sender's
        message fails for it; those not in within :data:`RENEW_DRAIN_TIMEOUT` fail as "may or
        may not have been delivered". Why every nack gets a new channel (a stale channel kept
        nacking a quorum inbox after failover):
        docs/decisions/publish-lane-on-its-own-connection.md.
        """
        assert self._renew_since is not None and self._connection is not None
        if self._in_flight and time.monotonic() - self._renew_since < RENEW_DRAIN_TIMEOUT:
            return
        old, stuck = self._channel, [entry.future for entry in self._in_flight.values()]
        self._in_flight, self._by_msg_id, self._next_tag = {}, {}, 1
        self._channel = self._open_confirm_channel(self._connection)
        self._renew_since = None
        if old is not None and old.is_open:
            old.close()
        for future in stuck:
            _fail(
                future,
                Unconfirmed(
                    "the broker did not confirm the message before its channel was renewed",
                    "it may or may not have been delivered: resend with the same --id or --key (a repeat is dropped)",
                ),
            )
        deferred, self._deferred = self._deferred, []
        glog.event(
            logger,
            "publish channel renewed after a nack",
            logging.WARNING,
            waiting=len(deferred),
            unconfirmed=len(stuck),
        )
        for batch, delay_ms in deferred:
            self._publish_batch(batch, delay_ms)

    def _on_channel_closed(self, channel: Any, reason: Exception) -> None:
        if channel is not self._channel:
            return  # the channel renewed after a nack, closed on purpose
        if not self._stop.is_set():
            glog.event(logger, "publish channel closed", logging.WARNING, reason=str(reason))
        self._broken = True


def await_confirm(future: Future, deadline: float) -> None:
    """Wait until ``deadline`` (monotonic) for one message's confirm; raise its error."""
    try:
        future.result(timeout=max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        raise confirm_timed_out() from None


def confirm_timed_out() -> Unconfirmed:
    """The error of a publish the broker did not confirm in time (it may still be delivered)."""
    return Unconfirmed(
        "the broker did not confirm the message in time",
        "the broker may be blocking publishers (memory or disk alarm): see `bridge doctor` and the broker's log",
    )


def _fail(future: Future, error: Exception) -> None:
    if not future.done():
        future.set_exception(error)
