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


#: what a failed connect attempt may raise and still be worth retrying
RETRYABLE = amqp_conn.CONNECTION_ERRORS + (BrokerUnavailable, pika.exceptions.AMQPError)
#: capped (10 s), jittered exponential backoff between connect attempts
_WAIT = tenacity.wait_random_exponential(multiplier=0.5, max=10)


def backoff(attempt: int) -> float:
    """Seconds to wait after failed connect attempt number ``attempt`` (1, 2, …)."""
    state = tenacity.RetryCallState(tenacity.Retrying(wait=_WAIT), None, (), {})
    state.attempt_number = attempt
    return float(_WAIT(state))


def log_retry(what: str, attempt: int, wait: float, error: BaseException | None) -> None:
    """The warning of one failed connect attempt of connection ``what``."""
    glog.event(
        logger,
        "broker unreachable, retrying",
        logging.WARNING,
        connection=what,
        attempt=attempt,
        wait=f"{wait:.1f}s",
        error=str(error),
    )


def retry_until_stopped(
    connect: Callable[[], None],
    stop: threading.Event,
    what: str = "gateway",
    pause: Callable[[float], None] | None = None,
) -> None:
    """Call ``connect`` until it succeeds, with :func:`backoff` between attempts, each retry
    logged. Raises ``tenacity.RetryError`` once ``stop`` is set. ``pause(seconds)`` waits
    between attempts (default: on ``stop``); a thread that runs a loop keeps it running."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log_retry(what, state.attempt_number, state.next_action.sleep if state.next_action else 0.0, exc)

    def sleep(seconds: float) -> None:
        (pause or stop.wait)(seconds)

    retrying = tenacity.Retrying(
        wait=_WAIT,
        retry=tenacity.retry_if_exception_type(RETRYABLE),
        stop=tenacity.stop_when_event_set(stop),
        sleep=sleep,
        before_sleep=before_sleep,
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
