"""Confirmed, mandatory publishing of envelopes (seed invariant 2: publish by recipient).

A message nobody can receive is an error, never a silent drop: every publish is
``mandatory`` on a channel in confirm mode, so an unroutable message comes back as
:class:`bridgecli.errors.Rejected` and a broker nack likewise.
"""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions

from bridgecli.amqp import topology
from bridgecli.envelope import Envelope
from bridgecli.errors import Rejected


class Publisher:
    """Publishes on one channel of a blocking connection, in confirm mode."""

    def __init__(self, channel: Any, user_id: str | None = None) -> None:
        self.channel = channel
        self.user_id = user_id
        channel.confirm_delivery()

    def publish(self, envelope: Envelope, *, delay_ms: int | None = None,
                headers: dict[str, Any] | None = None) -> None:
        """Publish ``envelope`` to its recipient's inbox (or through ``bridge.delay``)."""
        props = dict(envelope.amqp_properties())
        all_headers = dict(headers or {})
        exchange = topology.MSG
        if delay_ms:
            exchange = topology.DELAY
            all_headers[topology.DELAY_HEADER] = int(delay_ms)
        self.publish_raw(exchange, envelope.recipient, envelope.to_bytes(),
                         pika.BasicProperties(**props, headers=all_headers or None, user_id=self.user_id),
                         what=f"message {envelope.msg_id} to {envelope.recipient}")

    def publish_raw(self, exchange: str, routing_key: str, body: bytes,
                    properties: pika.BasicProperties, *, mandatory: bool = True, what: str = "message") -> None:
        try:
            self.channel.basic_publish(exchange, routing_key, body, properties, mandatory=mandatory)
        except pika.exceptions.UnroutableError:
            raise Rejected(f"{what}: no queue is bound for routing key {routing_key!r} on {exchange}",
                           "the recipient has no inbox: check the gid with `bridge roster`, "
                           "or register it first") from None
        except pika.exceptions.NackError:
            raise Rejected(f"{what}: the broker refused it (nack)",
                           "the queue may be full or the broker short of resources; retry later") from None
