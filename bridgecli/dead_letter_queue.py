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


def operator_uris(config: Config) -> list[str] | None:
    """The embedded node's admin when commands use that node: an impersonator, so that a
    retry can restore each dead letter's original ``user_id``. None: the configured broker."""
    if config.values.get("broker.uri"):
        return None
    from bridgecli import localbroker

    info = localbroker.read_state()
    if info is None or localbroker.credentials() is None:
        return None
    return [localbroker.admin_uri(info)]


def original_user(props: Any, trusted: frozenset[str] = frozenset()) -> str | None:
    """The ``user_id`` a dead letter's message was published with, as far as the broker vouches
    for it: its own when the broker dead-lettered it; for one a gateway dead-lettered, the
    recorded one only when that gateway's verified user owns the inbox (a host may forge dead
    letters, but only for itself) or is ``trusted``."""
    from bridgecli import gids

    headers = dict(props.headers or {})
    if topology.REASON_HEADER not in headers:
        return props.user_id or None

    def text(value: Any) -> str:
        return value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")

    claimed, queue = text(headers.get(topology.USER_HEADER)), text(headers.get(topology.QUEUE_HEADER))
    by = props.user_id
    gid = queue.split(".")[1] if queue.startswith("agent.") and queue.count(".") == 2 else ""
    if claimed and by and (by in trusted or (gid and gids.minted_on(gid, by))):
        return claimed
    return None


def _connect(config: Config):
    from bridgecli.amqp.connection import connect

    connection = connect(config, name="bridge-dlq", heartbeat=0, uris=operator_uris(config))
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
    """Re-publish matching dead letters to ``bridge.msg`` with their recipient as routing key
    and their original ``user_id`` (:func:`original_user`; the recipient's sender check reads
    it, and only an ``impersonator`` may publish another's); each is acked off the DLQ only
    after the broker confirmed the re-publish."""
    import pika
    import pika.exceptions

    from bridgecli.amqp.publisher import Publisher
    from bridgecli.errors import PermissionProblem
    from bridgecli.gateway.identity import IdentityPolicy

    trusted = IdentityPolicy.from_config(config.values).trusted_users
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
                user_id=original_user(props, trusted),
            )
            try:
                publisher.publish_raw(topology.MSG, method.routing_key, body, new_props, what=f"retry of {row['id']}")
            except pika.exceptions.ChannelClosedByBroker as exc:
                if exc.reply_code != 406:
                    raise
                raise PermissionProblem(
                    f"re-publishing {row['id']} as its original user {new_props.user_id!r} needs an impersonator",
                    "run `bridge dlq retry` on the hub machine (its admin may), or give this broker user "
                    "RabbitMQ's impersonator tag",
                ) from None
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
