"""Handing work to the gateway's I/O thread, the only thread that may touch its pika
connection (a pika connection is not thread-safe), to run after the loop's current step:
fire-and-forget (:func:`after_step`), or waiting for its result (:func:`call_after_step`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pika.exceptions

from bridgecli.amqp import connection as amqp_conn
from bridgecli.amqp.stepped import SteppedConnection
from bridgecli.errors import BrokerUnavailable
from bridgecli.gateway import log as glog

logger = logging.getLogger("bridgecli.gateway")


def after_step(connection: SteppedConnection | None, fn: Callable[[], None]) -> None:
    """Run ``fn`` on the thread driving ``connection``, after its current step. A failure inside it is logged, never
    fatal (a lost connection still propagates, so the reconnect loop takes over); with no
    connection nothing runs (the broker redelivers whatever ``fn`` would have acked)."""
    if connection is None:
        return

    def guarded() -> None:
        try:
            fn()
        except amqp_conn.CONNECTION_ERRORS + (pika.exceptions.AMQPConnectionError,):
            raise
        except Exception as exc:
            glog.event(logger, "I/O task failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")

    try:
        connection.after_step(guarded)
    except Exception:
        pass  # connection gone: the broker redelivers


def call_after_step(
    current: Callable[[], SteppedConnection | None],
    connected: threading.Event,
    fn: Callable[[], Any],
    timeout: float = 30.0,
) -> Any:
    """Run ``fn`` on the I/O thread of the connection ``current()`` returns, once ``connected``,
    after its current step, and return its result (from any other thread); BrokerUnavailable
    when that cannot be."""
    if not connected.wait(timeout=min(timeout, 5.0)):
        raise BrokerUnavailable(
            "the gateway is not connected to the broker right now", "see the gateway's log; it reconnects by itself"
        )
    future: Future = Future()

    def call() -> None:
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

    connection = current()
    if connection is None:
        raise BrokerUnavailable("the gateway lost its broker connection", "retry in a moment")
    connection.after_step(call)
    try:
        return future.result(timeout=timeout)
    except TimeoutError:
        future.cancel()
        raise BrokerUnavailable("the gateway's broker connection is stalled", "retry in a moment") from None
    except amqp_conn.CONNECTION_ERRORS as exc:
        raise BrokerUnavailable(f"lost the broker connection ({type(exc).__name__})", "retry in a moment") from None


def message_counts(connection: SteppedConnection, queues: list[str]) -> dict[str, int]:
    """Ready counts of ``queues`` through a channel of their own (I/O thread)."""
    depths: dict[str, int] = {}
    probe = connection.sync_channel(30.0, "probe")
    try:
        for name in queues:
            depths[name] = probe.queue_declare(name, passive=True).method.message_count
    finally:
        if probe.is_open:
            probe.close()
    return depths
