"""Operations on ``bridge.dlq``: peek, find, retry to the original recipient, purge.

Peeking uses ``basic_get`` without ack and then closes the channel, which returns every
message to the queue in its original order — AMQP 0-9-1 has no non-destructive browse.
"""

from __future__ import annotations

from typing import Any

from bridgecli.amqp import topology
from bridgecli.config import Config
from bridgecli.errors import NotFound


def _row(method: Any, props: Any, body: bytes) -> dict[str, Any]:
    headers = dict(props.headers or {})

    def text(value: Any) -> Any:
        return value.decode(errors="replace") if isinstance(value, bytes) else value

    deaths = headers.get("x-death") or []
    reason = text(headers.get(topology.REASON_HEADER)) or (text(deaths[0].get("reason")) if deaths else None)
    queue = text(headers.get(topology.QUEUE_HEADER)) or (text(deaths[0].get("queue")) if deaths else None)
    return {
        "id": props.message_id or f"tag-{method.delivery_tag}",
        "reason": reason,
        "detail": text(headers.get(topology.DETAIL_HEADER)),
        "queue": queue,
        "attempts": headers.get(topology.ATTEMPTS_HEADER),
        "routing_key": method.routing_key,
        "body": body.decode("utf-8", errors="replace"),
    }


def _connect(config: Config):
    from bridgecli.amqp.connection import connect

    connection = connect(config, name="bridge-dlq", heartbeat=0)
    channel = topology.ensure_shared(
        connection.channel, config.values["messaging.inbox_queue_type"], joined=bool(config.values.get("hub.id"))
    )
    return connection, channel


def peek(config: Config, limit: int = 100) -> list[dict[str, Any]]:
    connection, channel = _connect(config)
    rows = []
    try:
        for _ in range(limit):
            method, props, body = channel.basic_get(topology.DLQ, auto_ack=False)
            if method is None:
                break
            rows.append(_row(method, props, body))
    finally:
        connection.close()  # unacked -> requeued in order
    return rows


def find(config: Config, msg_id: str) -> dict[str, Any]:
    for row in peek(config, 10000):
        if row["id"] == msg_id or row["id"].startswith(msg_id):
            return row
    raise NotFound(f"no dead letter {msg_id!r} in bridge.dlq", "see `bridge dlq list`")


def retry(config: Config, ids: set[str] | None) -> list[str]:
    """Re-publish matching dead letters to ``bridge.msg`` with their recipient as routing key;
    each is acked off the DLQ only after the broker confirmed the re-publish."""
    import pika

    from bridgecli.amqp.publisher import Publisher

    connection, channel = _connect(config)
    publisher = Publisher(connection.channel())
    done: list[str] = []
    try:
        while True:
            method, props, body = channel.basic_get(topology.DLQ, auto_ack=False)
            if method is None:
                break
            row = _row(method, props, body)
            if ids is not None and not any(row["id"].startswith(i) for i in ids):
                continue  # stays unacked -> back in the queue on close
            headers = {
                k: v for k, v in (props.headers or {}).items() if not k.startswith("x-bridge-") and k != "x-death"
            }
            new_props = pika.BasicProperties(
                message_id=props.message_id,
                correlation_id=props.correlation_id,
                type=props.type,
                timestamp=props.timestamp,
                app_id=props.app_id,
                content_type=props.content_type,
                delivery_mode=2,
                headers=headers or None,
            )
            publisher.publish_raw(topology.MSG, method.routing_key, body, new_props, what=f"retry of {row['id']}")
            channel.basic_ack(method.delivery_tag)
            done.append(row["id"])
    finally:
        connection.close()
    if ids is not None and not done:
        raise NotFound("none of the given ids is in bridge.dlq", "see `bridge dlq list`")
    return done


def purge(config: Config) -> int:
    connection, channel = _connect(config)
    try:
        return channel.queue_purge(topology.DLQ).method.message_count
    finally:
        connection.close()
