"""A pika ``SelectConnection`` on an I/O loop of its own, driven in steps by the one thread that
owns it, with asynchronous channels.

Why: the publish lane and the roster listener want channels whose callbacks (confirms,
deliveries) run straight from the I/O loop, at hundreds of frames a second, and a loop they
step themselves between their own work. ``BlockingConnection`` offers the loop but its
asynchronous channels only through a private attribute; this uses pika's public API
(``IOLoop.start``/``stop``/``call_later``, ``SelectConnection.create_connection``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pika
import pika.exceptions
from pika.adapters.select_connection import IOLoop
from pika.adapters.utils import connection_workflow

from bridgecli.amqp.connection import cut_while_opening, parameters, refused
from bridgecli.errors import BrokerUnavailable

if TYPE_CHECKING:
    from bridgecli.config import Config


class SteppedConnection:
    """An open connection; every method but :meth:`add_callback_threadsafe` belongs to the
    owning thread. A lost connection raises its pika error from :meth:`process_data_events`,
    as a ``BlockingConnection`` does, so the same reconnect loops serve both."""

    def __init__(self, config: Config, name: str, connect_timeout: float = 5.0, ioloop: IOLoop | None = None) -> None:
        #: ``ioloop``: a loop the owning thread keeps across connections (it also serves other
        #: sockets); this connection then leaves it open when it closes
        self._owns_loop = ioloop is None
        self._ioloop = ioloop or IOLoop()
        #: calls from other threads, run between steps (outside the loop, so they may wait)
        self._calls: deque[Callable[[], None]] = deque()
        self._lost: BaseException | None = None
        self._closing = False
        params = parameters(config, name=name, connect_timeout=connect_timeout)
        done: list[Any] = []
        workflow = pika.SelectConnection.create_connection(params, self.arrived(done), custom_ioloop=self._ioloop)
        try:
            self._step_until(done, connect_timeout * 2 + 1)
        except ValueError as exc:
            done.append(cut_while_opening(exc))
        if not done:
            workflow.abort()
            self._step_until([], 0)
            self._close_loop()
            raise refused(TimeoutError("connection timed out"), params, config, connect_timeout)
        result = done[0]
        if isinstance(result, BaseException):
            self._close_loop()
            raise refused(_last_attempt_error(result), params, config, connect_timeout) from None
        self.connection: pika.SelectConnection = result
        self.connection.add_on_close_callback(self._on_closed)

    @property
    def is_open(self) -> bool:
        return self.connection.is_open and self._lost is None

    def server_info(self) -> dict[str, Any]:
        """The broker's product, version and cluster name (shown by ``bridge status``)."""
        properties = self.connection.server_properties or {}
        return {
            k: (v.decode() if isinstance(v, bytes) else v)
            for k, v in properties.items()
            if k in ("product", "version", "cluster_name")
        }

    def process_data_events(self, time_limit: float = 0.0) -> None:
        """Run the I/O loop for up to ``time_limit`` seconds (0: what is ready now; less when a
        call comes in), then the calls queued by other threads; raise the connection's error
        if it was lost."""
        self._step_until(None, time_limit)
        while self._calls and self._lost is None:
            self._calls.popleft()()
        if self._lost is not None:
            raise self._lost

    def add_callback_threadsafe(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the owning thread, between two steps of the loop (from any thread):
        outside the loop, so ``fn`` may wait for the broker (declare a queue, open a channel)."""
        self._calls.append(fn)
        self._ioloop.add_callback_threadsafe(self._ioloop.stop)

    def call_in_loop_threadsafe(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` inside the I/O loop, on the owning thread, as soon as it is free (from any
        thread): no step ends for it, so what it writes goes out in the same step. ``fn`` must
        not wait for the broker; use :meth:`add_callback_threadsafe` for calls that do."""
        self._ioloop.add_callback_threadsafe(fn)

    def channel(self, timeout: float, what: str) -> Any:
        """A new asynchronous ``pika.channel.Channel``; BrokerUnavailable naming ``what`` when
        the broker does not open it within ``timeout`` seconds."""
        opened: list[Any] = []
        self.connection.channel(on_open_callback=self.arrived(opened))
        self.wait_for(opened, timeout, f"the broker did not open the {what} channel")
        return opened[0]

    def wait_for(self, arrived: list[Any], timeout: float, problem: str) -> None:
        """Step until a callback has appended to ``arrived``; BrokerUnavailable(``problem``)
        after ``timeout`` seconds, the connection's error if it was lost meanwhile."""
        self._step_until(arrived, timeout)
        if self._lost is not None:
            raise self._lost
        if not arrived:
            raise BrokerUnavailable(problem, "check the broker's log")

    def sync_channel(self, timeout: float, what: str) -> SyncChannel:
        """A channel whose declares wait for the broker's answer, for :func:`topology.declare`."""
        return SyncChannel(self, self.channel(timeout, what), timeout)

    def close(self, timeout: float = 2.0) -> None:
        """Close the connection, and its loop unless it was given one (waits up to ``timeout``
        for the broker's close-ok)."""
        self._closing = True
        closed: list[Any] = []
        if self.connection.is_open:
            self.connection.add_on_close_callback(self.arrived(closed))
            try:
                self.connection.close()
            except pika.exceptions.ConnectionWrongStateError:
                closed.append(True)
            self._step_until(closed, timeout)
        self._close_loop()

    def _close_loop(self) -> None:
        if self._owns_loop:
            self._ioloop.close()

    def arrived(self, into: list[Any]) -> Callable[..., None]:
        """A callback that records its first argument in ``into`` and ends the current step
        (see :meth:`wait_for`)."""

        def record(first: Any = None, *_: Any) -> None:
            into.append(first)
            self._ioloop.stop()

        return record

    def _on_closed(self, _connection: Any, reason: BaseException) -> None:
        if not self._closing and self._lost is None:
            self._lost = reason if isinstance(reason, Exception) else pika.exceptions.ConnectionClosed(0, str(reason))
        self._ioloop.stop()

    def _step_until(self, arrived: list[Any] | None, timeout: float) -> None:
        """Run the loop until ``arrived`` is non-empty, the connection is lost, or ``timeout``."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            timer = self._ioloop.call_later(max(deadline - time.monotonic(), 0.0), self._ioloop.stop)
            try:
                self._ioloop.start()
            finally:
                self._ioloop.remove_timeout(timer)
            if arrived is None or arrived or self._lost is not None or time.monotonic() >= deadline:
                return


class SyncChannel:
    """The declares :func:`bridgecli.amqp.topology.declare` makes, each waiting for its answer
    on an asynchronous channel; a channel the broker closes raises ``ChannelClosedByBroker``
    as a ``BlockingChannel`` would."""

    def __init__(self, connection: SteppedConnection, channel: Any, timeout: float) -> None:
        self._connection = connection
        self._channel = channel
        self._timeout = timeout
        self._closed: list[Any] = []
        channel.add_on_close_callback(lambda _ch, reason: self._closed.append(reason))

    @property
    def is_open(self) -> bool:
        return bool(self._channel.is_open)

    def exchange_declare(self, exchange: str, **kwargs: Any) -> None:
        self._call(self._channel.exchange_declare, exchange, **kwargs)

    def queue_declare(self, queue: str, **kwargs: Any) -> None:
        self._call(self._channel.queue_declare, queue, **kwargs)

    def queue_bind(self, queue: str, exchange: str, **kwargs: Any) -> None:
        self._call(self._channel.queue_bind, queue, exchange, **kwargs)

    def close(self) -> None:
        if self._channel.is_open:
            self._channel.close()

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        done: list[Any] = []
        answered = self._connection.arrived(done)
        self._channel.add_on_close_callback(lambda _ch, _reason: answered(None))
        method(*args, callback=answered, **kwargs)
        self._connection.wait_for(done, self._timeout, "the broker did not answer a declare")
        if self._closed:
            reason = self._closed[0]
            if isinstance(reason, pika.exceptions.ChannelClosedByBroker):
                raise reason
            raise pika.exceptions.ChannelClosed(0, str(reason))


def _last_attempt_error(error: BaseException) -> BaseException:
    """The error of the last connection attempt, as ``BlockingConnection`` reports it."""
    if isinstance(error, connection_workflow.AMQPConnectionWorkflowFailed):
        error = error.exceptions[-1]
        if isinstance(error, connection_workflow.AMQPConnectorSocketConnectError):
            return pika.exceptions.AMQPConnectionError(error)
        if isinstance(error, connection_workflow.AMQPConnectorPhaseErrorBase):
            return error.exception
    return error
