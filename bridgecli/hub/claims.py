"""The host side of the registrar: re-claim legacy gids, release them after.

A gid minted on this host carries its tag, which the broker grants by pattern, so it needs no
claim and registering never waits on the hub. Gids minted before the tag rule (*legacy*) are
still granted from the hub's records: a joined host re-claims them when it connects. Requests
go to ``bridge.registrar`` with the connection's own ``user_id`` (the broker vouches for it);
answers come back on direct reply-to, which needs no queue and no grant.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from bridgecli import gids
from bridgecli.errors import (
    BridgeError,
    BrokerUnavailable,
    Conflict,
    PermissionProblem,
    RateLimited,
    Rejected,
    Timeout,
)

if TYPE_CHECKING:
    from bridgecli.config import Config
    from bridgecli.interfaces import Entity

EXCHANGE = "bridge.registrar"
ROUTING_KEY = "claim"
#: node enrolments, which only the hub machine's registrar serves (it alone signs node certificates)
NODE_ROUTING_KEY = "node"
REPLY_TO = "amq.rabbitmq.reply-to"
#: a registrar answers in milliseconds; this only bounds a hub that is down
DEFAULT_TIMEOUT = 10.0


def claims_enabled(config: Config) -> bool:
    """True when this host's grants come from a hub's registrar."""
    if config.values.get("hub.id"):
        return True
    if config.values.get("broker.uri"):
        return False
    from bridgecli.hub import layout

    return layout.is_active_hub()


def claimer_for(config: Config) -> GrantClaimer | None:
    """A claimer when this host's grants come from a hub, else None (nothing to ask). On a
    machine using its embedded broker the answer can change while a gateway runs (`bridge hub
    start` after `./dev run`), so there the claimer asks :func:`claims_enabled` at each call."""
    if config.values.get("hub.id"):
        return GrantClaimer(config)
    if config.values.get("broker.uri"):
        return None
    return GrantClaimer(config, only_while=lambda: claims_enabled(config))


def error_from_answer(answer: dict[str, Any]) -> BridgeError:
    """The typed error a registrar refusal stands for."""
    kind = answer.get("kind")
    message = f"the hub refused: {answer.get('error', 'no reason given')}"
    hint = answer.get("hint") or None
    if kind == "conflict":
        return Conflict(message, hint)
    if kind == "denied":
        return PermissionProblem(message, hint)
    if kind == "rate_limited":
        wait = retry_after(answer)
        return RateLimited(
            "the hub refused: this host sent the registrar too many requests",
            f"wait {wait:g} s and retry" if wait is not None else hint,
        )
    if kind == "limit":
        return Rejected(message, hint)
    return BridgeError(message, hint)


def retry_after(answer: dict[str, Any]) -> float | None:
    """The seconds a ``rate_limited`` answer asks to wait (None when it names none)."""
    value = answer.get("retryAfter")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 3600:
        return None
    return float(value)


class GrantClaimer:
    """Claims and releases this host's gids at the hub's registrar. Thread-safe: callers
    (API threads, the gateway's I/O thread at connect) take turns on one lazily opened
    connection, reopened once when it broke."""

    def __init__(
        self, config: Config, timeout: float = DEFAULT_TIMEOUT, only_while: Callable[[], bool] | None = None
    ) -> None:
        self.config = config
        self.timeout = timeout
        self._only_while = only_while
        self._lock = threading.Lock()
        self._connection: Any = None
        self._channel: Any = None
        self._answers: dict[str, dict[str, Any]] = {}
        self._username: str | None = None

    def claim(self, entities: Iterable[Entity]) -> None:
        """Own ``entities``' legacy gids at the hub (idempotent); raises the hub's refusal.
        Gids minted on this host are skipped: the broker grants them by their tag."""
        host = self.config.host_id
        items = [{"gid": e.gid, "label": e.label} for e in entities if not gids.minted_on(e.gid, host)]
        if items and self._active():
            self._call({"op": "claim", "entities": items})

    def release(self, released: Iterable[str]) -> None:
        """Give the legacy gids among ``released`` back (their inboxes are gone); the hub has
        no record of gids minted on this host, so nothing is asked for those."""
        host = self.config.host_id
        legacy = [g for g in released if not gids.minted_on(g, host)]
        if legacy and self._active():
            self._call({"op": "release", "gids": legacy})

    def nodes(self) -> list[Any] | None:
        """Every cluster node's AMQPS address as the hub knows it now (``host:port``
        strings, unchecked), or None when the hub answers none (not a cluster, an older
        hub); raises when it cannot be asked."""
        brokers = self._call({"op": "nodes"}).get("brokers")
        return brokers if isinstance(brokers, list) else None

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _active(self) -> bool:
        return self._only_while is None or self._only_while()

    def _call(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One request and its answer; a ``rate_limited`` answer is retried once, after the
        wait it names, when that still fits in the timeout."""
        began = time.monotonic()
        answer = self._call_once(payload)
        wait = retry_after(answer) if answer.get("kind") == "rate_limited" else None
        if wait is not None and time.monotonic() - began + wait < self.timeout:
            time.sleep(wait)
            answer = self._call_once(payload)
        if not answer.get("ok"):
            raise error_from_answer(answer)
        return answer

    def _call_once(self, payload: dict[str, Any]) -> dict[str, Any]:
        import pika.exceptions

        from bridgecli.amqp.connection import CONNECTION_ERRORS

        with self._lock:
            for attempt in (1, 2):
                try:
                    answer = self._round_trip(payload)
                    break
                except CONNECTION_ERRORS + (pika.exceptions.AMQPError,) as exc:
                    self._drop()
                    if isinstance(exc, pika.exceptions.ChannelClosedByBroker) and exc.reply_code == 404:
                        raise BrokerUnavailable(
                            "the hub's registrar is not running (no bridge.registrar)", "on the hub: `bridge hub start`"
                        ) from None
                    if attempt == 2:
                        raise BrokerUnavailable(
                            f"cannot reach the hub's registrar ({type(exc).__name__})",
                            "check the broker connection: `bridge doctor`",
                        ) from None
        return answer

    def _round_trip(self, payload: dict[str, Any]) -> dict[str, Any]:
        import pika

        if self._channel is None:
            from bridgecli.amqp.connection import connect

            self._connection = connect(self.config, name="bridge-claims", heartbeat=0)
            self._channel = self._connection.channel()
            self._channel.basic_consume(REPLY_TO, self._on_answer, auto_ack=True)
        correlation = str(uuid.uuid4())
        user = self._user()
        self._channel.basic_publish(
            EXCHANGE,
            ROUTING_KEY,
            json.dumps(payload).encode(),
            pika.BasicProperties(
                reply_to=REPLY_TO,
                correlation_id=correlation,
                user_id=user,
                content_type="application/json",
                expiration=str(int(self.timeout * 1000)),
            ),
        )
        deadline = time.monotonic() + self.timeout
        while correlation not in self._answers:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(
                    f"the hub's registrar did not answer within {self.timeout:g}s",
                    "is the hub running? on the hub: `bridge hub status`",
                )
            self._connection.process_data_events(time_limit=min(left, 0.2))
        return self._answers.pop(correlation)

    def _user(self) -> str:
        """The broker user this host connects as (the claim's ``user_id``), read once."""
        if self._username is None:
            from urllib.parse import unquote, urlsplit

            from bridgecli.amqp.uri import resolve_broker_uri

            # not pika.URLParameters: for amqps it loads the system CA bundle (~35 ms)
            self._username = unquote(urlsplit(resolve_broker_uri(self.config)[0]).username or "guest")
        return self._username

    def _on_answer(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        try:
            answer = json.loads(body)
        except ValueError:  # not an answer of the registrar's: the wait times out
            return
        if isinstance(answer, dict):
            self._answers[props.correlation_id] = answer

    def _drop(self) -> None:
        # the user is read again with the next connection: an upgrade can change it
        connection, self._connection, self._channel, self._username = self._connection, None, None, None
        self._answers.clear()
        if connection is not None:
            try:
                if connection.is_open:
                    connection.close()
            except Exception:  # dropping a connection that already failed: nothing left to report
                pass
