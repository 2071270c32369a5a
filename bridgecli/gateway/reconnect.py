"""The gateway's reconnect policy, shared by its consuming connection and its publish lane."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pika.exceptions
import tenacity

from bridgecli.amqp import connection as amqp_conn
from bridgecli.errors import BrokerUnavailable
from bridgecli.gateway import log as glog

logger = logging.getLogger("bridgecli.gateway")


def retry_until_stopped(
    connect: Callable[[], None],
    stop: threading.Event,
    what: str = "gateway",
    pause: Callable[[float], None] | None = None,
) -> None:
    """Call ``connect`` until it succeeds: capped (10 s), jittered exponential backoff, each
    retry logged. Raises ``tenacity.RetryError`` once ``stop`` is set. ``pause(seconds)``
    waits between attempts (default: on ``stop``); a thread that runs a loop keeps it running."""

    def log_retry(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        glog.event(
            logger,
            "broker unreachable, retrying",
            logging.WARNING,
            connection=what,
            attempt=state.attempt_number,
            wait=f"{state.next_action.sleep:.1f}s" if state.next_action else "",
            error=str(exc),
        )

    def sleep(seconds: float) -> None:
        (pause or stop.wait)(seconds)

    retrying = tenacity.Retrying(
        wait=tenacity.wait_random_exponential(multiplier=0.5, max=10),
        retry=tenacity.retry_if_exception_type(
            amqp_conn.CONNECTION_ERRORS + (BrokerUnavailable, pika.exceptions.AMQPError)
        ),
        stop=tenacity.stop_when_event_set(stop),
        sleep=sleep,
        before_sleep=log_retry,
    )
    retrying(connect)


def keep_connected(
    stop: threading.Event,
    what: str,
    *,
    connect: Callable[[], None],
    serve: Callable[[], None],
    close: Callable[[], None],
    lost: tuple[type[BaseException], ...],
    pause: Callable[[float], None] | None = None,
) -> None:
    """The life of a gateway side connection (publish lane, roster listener) on its own
    thread: connect with :func:`retry_until_stopped`, ``serve`` until it returns or raises one
    of ``lost`` (logged as "<what> connection lost"), ``close``, pause briefly, again — until
    ``stop`` is set. ``pause`` as for :func:`retry_until_stopped`."""
    wait = pause or stop.wait
    while not stop.is_set():
        try:
            retry_until_stopped(connect, stop, what, pause)
        except tenacity.RetryError:
            break
        if stop.is_set():
            break
        try:
            serve()
        except lost as exc:
            glog.event(
                logger, f"{what.split()[0]} connection lost", logging.WARNING, error=f"{type(exc).__name__}: {exc}"
            )
        close()
        if not stop.is_set():
            wait(0.2)
    close()
