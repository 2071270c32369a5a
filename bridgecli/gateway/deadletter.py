"""Moving messages to ``bridge.dlq`` without losing any (poison handling)."""

from __future__ import annotations

import logging
from typing import Any

import pika
import pika.exceptions

from bridgecli.amqp import topology
from bridgecli.amqp.publisher import Publisher
from bridgecli.gateway import log as glog

logger = logging.getLogger("bridgecli.gateway")


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
        headers.update(
            {topology.REASON_HEADER: reason, topology.DETAIL_HEADER: detail, topology.QUEUE_HEADER: queue_name}
        )
        if props.user_id:
            headers[topology.USER_HEADER] = props.user_id
        props.headers = headers
        props.user_id = publisher.user_id if publisher is not None else None
        if publisher is not None:
            publisher.publish_raw(topology.DLX, method.routing_key, body, props, mandatory=False)
        else:
            channel.basic_publish(topology.DLX, method.routing_key, body, props)
        channel.basic_ack(method.delivery_tag)
        moved += 1


def dead_letter(
    publisher: Publisher,
    channel: Any,
    tag: int,
    props: Any,
    body: bytes,
    queue_name: str,
    reason: str,
    detail: str,
    attempts: int | None = None,
) -> None:
    """Publish one delivery to ``bridge.dlx`` with the reason in headers, then ack it on
    ``channel``: the message is never dropped silently and never blocks the queue."""
    headers = dict(getattr(props, "headers", None) or {})
    headers.update(
        {topology.REASON_HEADER: reason, topology.DETAIL_HEADER: detail[:1000], topology.QUEUE_HEADER: queue_name}
    )
    if attempts is not None:
        headers[topology.ATTEMPTS_HEADER] = attempts
    original_user = getattr(props, "user_id", None)
    if original_user:
        headers[topology.USER_HEADER] = original_user
    properties = pika.BasicProperties(
        message_id=getattr(props, "message_id", None),
        correlation_id=getattr(props, "correlation_id", None),
        type=getattr(props, "type", None),
        timestamp=getattr(props, "timestamp", None),
        app_id=getattr(props, "app_id", None),
        content_type=getattr(props, "content_type", None),
        delivery_mode=2,
        headers=headers,
        user_id=publisher.user_id,
    )
    routing_key = queue_name.split(".")[1] if queue_name.startswith("agent.") else queue_name
    publisher.publish_raw(topology.DLX, routing_key, body, properties, mandatory=False, what="dead letter")
    channel.basic_ack(tag)
    glog.event(logger, "dead-lettered", logging.WARNING, queue=queue_name, reason=reason, detail=detail[:200])
