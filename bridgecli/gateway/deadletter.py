"""Moving messages to ``bridge.dlq`` without losing any (seed §3: poison handling)."""

from __future__ import annotations

from typing import Any

import pika.exceptions

from bridgecli.amqp import topology
from bridgecli.amqp.publisher import Publisher


def drain_to_dlq(channel: Any, publisher: Publisher | None, queue_name: str, reason: str, detail: str) -> int:
    """Move every message of ``queue_name`` to ``bridge.dlx`` with ``reason`` (nothing lost)."""
    moved = 0
    try:
        channel.queue_declare(queue_name, passive=True)
    except pika.exceptions.ChannelClosedByBroker:
        return 0
    while True:
        method, props, body = channel.basic_get(queue_name, auto_ack=False)
        if method is None:
            return moved
        headers = dict(props.headers or {})
        headers.update({topology.REASON_HEADER: reason, topology.DETAIL_HEADER: detail,
                        topology.QUEUE_HEADER: queue_name})
        props.headers = headers
        if publisher is not None:
            publisher.publish_raw(topology.DLX, method.routing_key, body, props, mandatory=False)
        else:
            channel.basic_publish(topology.DLX, method.routing_key, body, props)
        channel.basic_ack(method.delivery_tag)
        moved += 1
