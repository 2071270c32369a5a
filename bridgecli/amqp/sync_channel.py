"""Channels of a :class:`~bridgecli.amqp.stepped.SteppedConnection` whose calls wait for the
broker's answer, with the calls, results and exceptions of pika's ``BlockingChannel``.

Why: the gateway's consuming connection is stepped on the one loop that also serves its publish
lane and local socket, while the code around it keeps waiting for a declare or a confirm as it
would on a ``BlockingChannel``. Such a wait steps the loop, so it is made between two steps,
never inside one of the loop's callbacks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pika
import pika.exceptions
from pika import spec

from bridgecli.errors import BrokerUnavailable


class SteppedConnection(Protocol):
    """What a channel asks of :class:`bridgecli.amqp.stepped.SteppedConnection` (which makes
    these channels, hence a protocol, not an import): see its methods of these names."""

    def arrived(self, into: list[Any]) -> Callable[..., None]: ...
    def after_step(self, fn: Callable[[], None]) -> None: ...
    def wake(self) -> None: ...
    def wait_until(self, ready: Callable[[], bool], timeout: float | None) -> None: ...


class SyncChannel:
    """One asynchronous channel, used from the connection's owning thread only. A call the
    broker answers by closing the channel raises ``ChannelClosedByBroker``; a lost connection
    raises the connection's error; ``timeout`` (seconds, None: none) bounds each wait."""

    def __init__(self, connection: SteppedConnection, channel: Any, timeout: float | None = None) -> None:
        self._connection = connection
        self._channel = channel
        self._timeout = timeout
        self._closed: list[BaseException] = []
        #: confirm mode: the publishes sent (one waits at a time), the broker's answer to the
        #: last one (acked or not), and whether it was returned as unroutable
        self._confirming = False
        self._sent = 0
        self._answer: list[bool] = []
        self._returned = False
        self._got: list[Any] = []
        channel.add_on_close_callback(self._on_close)
        channel.add_callback(self._on_get_empty, [spec.Basic.GetEmpty], one_shot=False)

    @property
    def is_open(self) -> bool:
        return bool(self._channel.is_open)

    @property
    def channel_number(self) -> int:
        return int(self._channel.channel_number)

    # --- calls answered by the broker ---------------------------------------------------

    def exchange_declare(self, exchange: str, **kwargs: Any) -> Any:
        return self._call(self._channel.exchange_declare, exchange, **kwargs)

    def queue_declare(self, queue: str, **kwargs: Any) -> Any:
        """The broker's ``Queue.DeclareOk`` frame (``.method.message_count``, ``consumer_count``)."""
        return self._call(self._channel.queue_declare, queue, **kwargs)

    def queue_bind(self, queue: str, exchange: str, **kwargs: Any) -> Any:
        return self._call(self._channel.queue_bind, queue, exchange, **kwargs)

    def queue_unbind(self, queue: str, exchange: str, **kwargs: Any) -> Any:
        return self._call(self._channel.queue_unbind, queue, exchange, **kwargs)

    def queue_delete(self, queue: str, **kwargs: Any) -> Any:
        return self._call(self._channel.queue_delete, queue, **kwargs)

    def basic_qos(self, **kwargs: Any) -> Any:
        return self._call(self._channel.basic_qos, **kwargs)

    def basic_consume(
        self,
        queue: str,
        on_message_callback: Callable[[Any, Any, Any, bytes], None],
        in_loop: bool = False,
        **kwargs: Any,
    ) -> str:
        """Start a consumer; its deliveries reach ``on_message_callback(self, method, props,
        body)`` in the order they came: between steps of the loop, where it may wait for the
        broker, or with ``in_loop`` straight from the loop, where it must not. Returns its tag."""

        def deliver(_channel: Any, method: Any, properties: Any, body: bytes) -> None:
            if in_loop:
                on_message_callback(self, method, properties, body)
            else:
                self._connection.after_step(lambda: on_message_callback(self, method, properties, body))

        done: list[Any] = []
        tag = self._channel.basic_consume(queue, deliver, callback=self._connection.arrived(done), **kwargs)
        self._wait(done)
        return str(tag)

    def basic_cancel(self, consumer_tag: str) -> None:
        """Stop a consumer (and wait for the broker's cancel-ok); an unknown tag is a no-op."""
        if consumer_tag not in self._channel.consumer_tags:
            return
        done: list[Any] = []
        self._channel.basic_cancel(consumer_tag, callback=self._connection.arrived(done))
        self._wait(done)

    def basic_get(self, queue: str, auto_ack: bool = False) -> tuple[Any, Any, Any]:
        """(method, properties, body) of one message, or (None, None, None) when it is empty."""
        self._got = []
        got = self._got

        def received(_channel: Any, method: Any, properties: Any, body: bytes) -> None:
            got.append((method, properties, body))
            self._connection.wake()

        self._channel.basic_get(queue, received, auto_ack=auto_ack)
        self._wait(got)
        return got[0]

    def confirm_delivery(self) -> None:
        """Confirm mode: from now on :meth:`basic_publish` waits for the broker's ack, and
        raises ``UnroutableError`` (a mandatory message returned) or ``NackError``."""
        done: list[Any] = []
        self._channel.add_on_return_callback(self._on_return)
        self._channel.confirm_delivery(self._on_confirm, callback=self._connection.arrived(done))
        self._wait(done)
        self._confirming = True

    # --- calls that wait for nothing, unless confirming --------------------------------

    def basic_publish(
        self, exchange: str, routing_key: str, body: bytes, properties: Any = None, mandatory: bool = False
    ) -> None:
        self._answer, self._returned = [], False
        self._channel.basic_publish(exchange, routing_key, body, properties, mandatory)
        if not self._confirming:
            return
        self._sent += 1
        self._wait(self._answer)
        if self._returned:  # the broker returns a mandatory message before it acks it
            raise pika.exceptions.UnroutableError([])
        if not self._answer[0]:
            raise pika.exceptions.NackError([])

    def basic_ack(self, delivery_tag: int = 0, multiple: bool = False) -> None:
        self._channel.basic_ack(delivery_tag, multiple)

    def basic_nack(self, delivery_tag: int = 0, multiple: bool = False, requeue: bool = True) -> None:
        self._channel.basic_nack(delivery_tag, multiple, requeue)

    def basic_reject(self, delivery_tag: int = 0, requeue: bool = True) -> None:
        self._channel.basic_reject(delivery_tag, requeue)

    def close(self) -> None:
        if self._channel.is_open:
            self._channel.close()

    # --- the loop's callbacks and the waits -----------------------------------------------

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        done: list[Any] = []
        method(*args, callback=self._connection.arrived(done), **kwargs)
        self._wait(done)
        return done[0]

    def _wait(self, done: list[Any]) -> None:
        """Step until ``done`` has the answer; the channel's or the connection's error if it
        closed first, BrokerUnavailable after :attr:`_timeout`."""
        self._connection.wait_until(lambda: bool(done or self._closed), self._timeout)
        if done:
            return
        if not self._closed:
            raise BrokerUnavailable("the broker did not answer a call in time", "check the broker's log")
        reason = self._closed[0]
        if isinstance(reason, pika.exceptions.ChannelClosedByBroker):
            raise reason
        raise pika.exceptions.ChannelClosed(0, str(reason))

    def _on_close(self, _channel: Any, reason: BaseException) -> None:
        self._closed.append(reason)
        self._connection.wake()

    def _on_get_empty(self, _frame: Any) -> None:
        self._got.append((None, None, None))
        self._connection.wake()

    def _on_return(self, _channel: Any, _method: Any, _properties: Any, _body: bytes) -> None:
        self._returned = True

    def _on_confirm(self, frame: Any) -> None:
        if frame.method.delivery_tag >= self._sent:  # it answers the publish that waits
            self._answer.append(isinstance(frame.method, spec.Basic.Ack))
            self._connection.wake()
