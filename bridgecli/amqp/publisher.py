"""Confirmed, mandatory publishing of envelopes (docs/design.md#invariant-2).

A message nobody can receive is an error, never a silent drop: every publish is
``mandatory`` on a channel in confirm mode, so an unroutable message comes back as
:class:`bridgecli.errors.Rejected` and a broker nack likewise.
"""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions

from bridgecli import channels
from bridgecli.amqp import topology
from bridgecli.envelope import Envelope
from bridgecli.errors import BridgeError, EmptyChannel, Rejected


class Publisher:
    """Publishes on one channel of a blocking connection, in confirm mode."""

    def __init__(self, channel: Any, user_id: str | None = None) -> None:
        self.channel = channel
        self.user_id = user_id
        channel.confirm_delivery()

    def publish(
        self, envelope: Envelope, *, delay_ms: int | None = None, headers: dict[str, Any] | None = None
    ) -> None:
        """Publish ``envelope`` to its recipient's inbox (or through ``bridge.delay``)."""
        exchange, routing_key, body, properties = amqp_message(envelope, self.user_id, delay_ms, headers)
        self.publish_raw(exchange, routing_key, body, properties, what=describe(envelope))

    def publish_raw(
        self,
        exchange: str,
        routing_key: str,
        body: bytes,
        properties: pika.BasicProperties,
        *,
        mandatory: bool = True,
        what: str = "message",
    ) -> None:
        try:
            self.channel.basic_publish(exchange, routing_key, body, properties, mandatory=mandatory)
        except pika.exceptions.UnroutableError:
            raise unroutable(what, exchange, routing_key) from None
        except pika.exceptions.NackError:
            raise nacked(what) from None


def amqp_message(
    envelope: Envelope, user_id: str | None, delay_ms: int | None = None, headers: dict[str, Any] | None = None
) -> tuple[str, str, bytes, pika.BasicProperties]:
    """(exchange, routing key, body, properties) that carry ``envelope`` to its recipient's
    inbox — through the sending host's ``bridge.delay.<host>`` when ``delay_ms`` is given."""
    props = dict(envelope.amqp_properties())
    all_headers = dict(headers or {})
    exchange = topology.MSG
    if delay_ms:
        exchange = topology.delay_exchange(envelope.sender_host or "").name
        all_headers[topology.DELAY_HEADER] = int(delay_ms)
    return (
        exchange,
        envelope.recipient if envelope.channel is None else channels.routing_key(envelope.channel),
        envelope.to_bytes(),
        pika.BasicProperties(**props, headers=all_headers or None, user_id=user_id),
    )


def describe(envelope: Envelope) -> str:
    if envelope.channel is not None:
        return f"message {envelope.msg_id} to channel #{envelope.channel}"
    return f"message {envelope.msg_id} to {envelope.recipient}"


def unroutable(what: str, exchange: str, routing_key: str) -> BridgeError:
    """The error for a mandatory publish the broker returned: nobody can receive it (for a
    channel: nobody has joined it)."""
    if routing_key.startswith(channels.KEY_PREFIX):
        name = routing_key[len(channels.KEY_PREFIX) :]
        return EmptyChannel(
            f"{what}: channel #{name} has no members, so no copy went out",
            f"members join with `bridge channel join {name}`; see `bridge channel list`",
        )
    return Rejected(
        f"{what}: no queue is bound for routing key {routing_key!r} on {exchange}",
        "the recipient has no inbox: check the gid with `bridge roster`, or register it first",
    )


def nacked(what: str) -> Rejected:
    return Rejected(
        f"{what}: the broker refused it (nack)", "the queue may be full or the broker short of resources; retry later"
    )
