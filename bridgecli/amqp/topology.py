"""The broker topology as plain data, plus one idempotent ``declare()``.

Names (docs/protocol.md, "Broker topology"): exchanges ``bridge.msg`` (topic), ``bridge.roster`` (topic),
``bridge.control`` (direct), ``bridge.dlx`` (fanout) and ``bridge.delay``; queues
``agent.<gid>.inbox``, ``control.<host>``, ``roster.<host>`` and ``bridge.dlq``.

``bridge.delay`` is built from parts every RabbitMQ has, and is the same on every broker: a
*headers* exchange that routes on the ``x-delay`` header into one TTL queue per delay value
(``bridge.delay.<ms>``), which dead-letters into ``bridge.msg`` with the message's original
routing key. One mechanism, so the one the tests exercise is the one users run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MSG = "bridge.msg"
ROSTER = "bridge.roster"
CONTROL = "bridge.control"
DLX = "bridge.dlx"
DELAY = "bridge.delay"
DLQ = "bridge.dlq"

#: headers put on dead-lettered messages by the gateway
REASON_HEADER = "x-bridge-reason"
DETAIL_HEADER = "x-bridge-detail"
QUEUE_HEADER = "x-bridge-queue"
ATTEMPTS_HEADER = "x-bridge-attempts"
DELAY_HEADER = "x-delay"


@dataclass(frozen=True)
class Exchange:
    name: str
    type: str
    durable: bool = True
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Binding:
    exchange: str
    routing_key: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Queue:
    name: str
    durable: bool = True
    exclusive: bool = False
    auto_delete: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)
    bindings: tuple[Binding, ...] = ()


SHARED_EXCHANGES = (
    Exchange(MSG, "topic"),
    Exchange(ROSTER, "topic"),
    Exchange(CONTROL, "direct"),
    Exchange(DLX, "fanout"),
)

DEAD_LETTER_QUEUE = Queue(DLQ, bindings=(Binding(DLX),))


def dead_letter_queue(queue_type: str = "classic") -> Queue:
    """``bridge.dlq``. On a cluster (quorum inboxes) it is a quorum queue too: a classic
    queue lives on one node, and while that node is down every gateway's declare fails with
    404 "home node is down" — the gateway could not fail over to another node."""
    if queue_type == "quorum":
        return Queue(DLQ, arguments={"x-queue-type": "quorum"}, bindings=(Binding(DLX),))
    return DEAD_LETTER_QUEUE


DELAY_EXCHANGE = Exchange(DELAY, "headers")


def inbox_name(gid: str) -> str:
    return f"agent.{gid}.inbox"


def inbox_queue(gid: str, queue_type: str = "classic", max_attempts: int = 5) -> Queue:
    """``agent.<gid>.inbox``: durable, dead-lettering to ``bridge.dlx``, bound by gid.

    Quorum inboxes also get the broker's own ``x-delivery-limit`` (the gateway counts
    attempts itself as well, which is what makes classic queues dead-letter too) and
    ``x-single-active-consumer``: quorum queues ignore the exclusive flag of a consume, so on a
    cluster it is this argument that keeps a second consumer from taking half of the messages.
    """
    args: dict[str, Any] = {"x-dead-letter-exchange": DLX, "x-queue-type": queue_type}
    if queue_type == "quorum":
        args["x-delivery-limit"] = max_attempts
        args["x-single-active-consumer"] = True
    return Queue(inbox_name(gid), arguments=args, bindings=(Binding(MSG, gid),))


def control_queue(host: str, queue_type: str = "classic") -> Queue:
    """``control.<host>``: durable, bound to ``bridge.control`` with the host id (quorum on a
    cluster, for the same reason as :func:`dead_letter_queue`, with one active consumer as
    :func:`inbox_queue` has)."""
    args: dict[str, Any] = (
        {"x-queue-type": "quorum", "x-single-active-consumer": True} if queue_type == "quorum" else {}
    )
    return Queue(f"control.{host}", arguments=args, bindings=(Binding(CONTROL, host),))


#: the exclusive queue a ``bridge spawn``/``stop`` requester gets its answer on; bound to
#: ``bridge.control`` under its own name (host ids have no dots, so no host key can match it)
REPLY_PREFIX = "bridge.reply."


def reply_queue_name() -> str:
    import uuid

    return f"{REPLY_PREFIX}{uuid.uuid4()}"


def is_reply_queue(name: str) -> bool:
    """Is ``name`` a requester's reply queue (``bridge.reply.<uuid>``)?"""
    import re

    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    return re.fullmatch(r"bridge\.reply\." + uuid, name) is not None


def roster_queue(host: str) -> Queue:
    """``roster.<host>``: transient (exclusive, auto-delete) — presence is soft state."""
    return Queue(
        f"roster.{host}", durable=False, exclusive=True, auto_delete=True, bindings=(Binding(ROSTER, "roster.#"),)
    )


def delay_queue(delay_ms: int) -> Queue:
    """One TTL tier of ``bridge.delay``: holds messages ``delay_ms`` and then
    dead-letters them into ``bridge.msg`` under their original routing key. The tier deletes
    itself when unused for a minute past its delay."""
    return Queue(
        f"{DELAY}.{delay_ms}",
        arguments={
            "x-message-ttl": delay_ms,
            "x-dead-letter-exchange": MSG,
            "x-expires": delay_ms + 60_000,
        },
        bindings=(Binding(DELAY, "", {"x-match": "all", DELAY_HEADER: delay_ms}),),
    )


def describe(obj: Exchange | Queue) -> str:
    kind = "exchange" if isinstance(obj, Exchange) else "queue"
    args = getattr(obj, "arguments", {})
    return f"{kind} {obj.name}" + (f" with arguments {args}" if args else "")


def declare(channel: Any, *objects: Exchange | Queue) -> None:
    """Declare exchanges, queues and their bindings (idempotent).

    A name that already exists with other arguments makes the broker close the channel with
    406; that becomes a :class:`bridgecli.errors.Conflict` naming the object, the arguments
    we want, and the broker's own words about which argument differs.
    """
    import pika.exceptions

    from bridgecli.errors import Conflict

    for obj in objects:
        try:
            if isinstance(obj, Exchange):
                channel.exchange_declare(
                    obj.name, exchange_type=obj.type, durable=obj.durable, arguments=obj.arguments or None
                )
            else:
                channel.queue_declare(
                    obj.name,
                    durable=obj.durable,
                    exclusive=obj.exclusive,
                    auto_delete=obj.auto_delete,
                    arguments=obj.arguments or None,
                )
                for b in obj.bindings:
                    channel.queue_bind(obj.name, b.exchange, routing_key=b.routing_key, arguments=b.arguments or None)
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code == 406:
                raise Conflict(
                    f"{describe(obj)} already exists on the broker with other arguments (broker: {exc.reply_text})",
                    _conflict_hint(obj),
                ) from None
            raise


def _conflict_hint(obj: Exchange | Queue) -> str:
    if isinstance(obj, Exchange):
        return (
            f"bridge needs {obj.name} to be a {obj.type} exchange: with no gateway running, "
            f"delete the old one (`rabbitmqadmin delete exchange name={obj.name}` or the "
            "management UI) and start again"
        )
    return (
        "delete the old object (e.g. `rabbitmqctl delete_queue NAME`) or change the "
        "setting back (messaging.inbox_queue_type)"
    )
