"""The broker topology as plain data, plus one idempotent ``declare()``.

The *shared* objects (``bridge.msg``, ``bridge.roster``, ``bridge.ctl``, ``bridge.dlx``,
``bridge.dlq``) are declared by the broker's owner and only checked by joined hosts. Every
other name carries its host id or a gid minted with the host's tag (inboxes,
``control.<host>``, ``roster.<host>``, ``bridge.reply.<host>.*``, ``bridge.delay.<host>*``),
so the broker can grant each host its own objects and nothing else (docs/protocol.md).
Delays are one mechanism on every broker: a headers exchange per host routing on ``x-delay``
into TTL queues that dead-letter into ``bridge.msg``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MSG = "bridge.msg"
ROSTER = "bridge.roster"
CONTROL = "bridge.ctl"
#: the direct exchange control requests used before ``bridge.ctl``: any host that could bind
#: it could bind another host's key; nothing uses it now, and the hub deletes it
LEGACY_CONTROL = "bridge.control"
DLX = "bridge.dlx"
DELAY = "bridge.delay"
DLQ = "bridge.dlq"

#: headers put on dead-lettered messages by the gateway
REASON_HEADER = "x-bridge-reason"
DETAIL_HEADER = "x-bridge-detail"
QUEUE_HEADER = "x-bridge-queue"
ATTEMPTS_HEADER = "x-bridge-attempts"
#: the ``user_id`` a message had when a gateway dead-lettered it: the dead letter itself
#: carries the dead-lettering gateway's own, the only one the broker lets it publish
USER_HEADER = "x-bridge-user"
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
    Exchange(CONTROL, "topic"),
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


def delay_exchange(host: str) -> Exchange:
    """``bridge.delay.<host>``: the headers exchange in front of ``host``'s delay tiers. One per
    host: binding a queue to a shared one would copy every host's delayed messages."""
    return Exchange(f"{DELAY}.{host}", "headers")


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


def channel_binding(name: str) -> Binding:
    """A member inbox's binding to channel ``name``: one publish under its key reaches every
    member, and the broker makes the copies (:mod:`bridgecli.channels`)."""
    from bridgecli import channels

    return Binding(MSG, channels.routing_key(name))


def control_queue(host: str, queue_type: str = "classic") -> Queue:
    """``control.<host>``: durable, bound to ``bridge.control`` with the host id (quorum on a
    cluster, for the same reason as :func:`dead_letter_queue`, with one active consumer as
    :func:`inbox_queue` has)."""
    args: dict[str, Any] = (
        {"x-queue-type": "quorum", "x-single-active-consumer": True} if queue_type == "quorum" else {}
    )
    return Queue(f"control.{host}", arguments=args, bindings=(Binding(CONTROL, host),))


#: the exclusive queue a ``bridge spawn``/``stop`` requester on host H gets its answer on,
#: ``bridge.reply.<H>.<uuid>``, bound to ``bridge.ctl`` under ``reply.<H>.<uuid>`` (host ids
#: have no dots, so no host key can match it; topic permissions let H bind only its own)
REPLY_PREFIX = "bridge.reply."
REPLY_KEY_PREFIX = "reply."
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def reply_queue(host: str) -> Queue:
    """A new exclusive reply queue of a requester on ``host``, bound under its reply key."""
    import uuid

    suffix = f"{host}.{uuid.uuid4()}"
    return Queue(
        f"{REPLY_PREFIX}{suffix}",
        durable=False,
        exclusive=True,
        auto_delete=True,
        bindings=(Binding(CONTROL, f"{REPLY_KEY_PREFIX}{suffix}"),),
    )


def reply_key_host(key: str) -> str | None:
    """The host whose reply queue ``key`` (``reply.<host>.<uuid>``) names, else None."""
    import re

    match = re.fullmatch(r"reply\.([a-z0-9][a-z0-9_-]{0,62})\." + _UUID, key)
    return match.group(1) if match else None


def roster_queue(host: str) -> Queue:
    """``roster.<host>``: transient (exclusive, auto-delete) — presence is soft state."""
    return Queue(
        f"roster.{host}", durable=False, exclusive=True, auto_delete=True, bindings=(Binding(ROSTER, "roster.#"),)
    )


def relay_queue() -> Queue:
    """``bridge.roster.relay``: every host frame, for the roster relays. One relay at a time
    consumes it (single active consumer; the others stand by); frames older than 30 s or past
    the length caps (200,000 frames, 64 MiB) are dropped, oldest first: presence is soft state."""
    return Queue(
        "bridge.roster.relay",
        durable=False,
        arguments={
            "x-single-active-consumer": True,
            "x-message-ttl": 30_000,
            "x-max-length": 200_000,
            # a host that floods its own key cannot grow it past this: the broker's memory
            # alarm would stop every publisher of the fleet
            "x-max-length-bytes": 64 << 20,
            "x-overflow": "drop-head",
        },
        bindings=(Binding(ROSTER, "roster.#"),),
    )


def delay_queue(host: str, delay_ms: int) -> Queue:
    """One TTL tier of ``host``'s delay exchange: holds messages ``delay_ms`` and then
    dead-letters them into ``bridge.msg`` under their original routing key. The tier deletes
    itself when unused for a minute past its delay."""
    return Queue(
        f"{DELAY}.{host}.{delay_ms}",
        arguments={
            "x-message-ttl": delay_ms,
            "x-dead-letter-exchange": MSG,
            "x-expires": delay_ms + 60_000,
        },
        bindings=(Binding(f"{DELAY}.{host}", "", {"x-match": "all", DELAY_HEADER: delay_ms}),),
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


def declare_shared(channel: Any, queue_type: str = "classic", *, passive: bool = False) -> None:
    """Make sure the shared objects exist: declare them (the broker's owner, who may), or,
    with ``passive``, only check them (a joined host, which may not: whoever could declare
    them could also delete them under every other host). A missing one is a clear error."""
    import pika.exceptions

    from bridgecli.errors import BrokerUnavailable

    if not passive:
        declare(channel, *SHARED_EXCHANGES, dead_letter_queue(queue_type))
        return
    for exchange in SHARED_EXCHANGES:
        try:
            channel.exchange_declare(exchange.name, passive=True)
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code == 404:
                raise BrokerUnavailable(
                    f"the broker has no exchange {exchange.name}, and this host's broker user may not declare it",
                    "on a hub, run `bridge hub start` with this version of bridge; on a broker you run, "
                    "start one gateway as a user with full permissions first (docs/deploy.md)",
                ) from None
            raise


def ensure_shared(open_channel: Any, queue_type: str = "classic", *, joined: bool = False) -> Any:
    """A channel from ``open_channel()`` on which the shared objects are known to exist. A
    host ``joined`` to a hub only checks them; any other declares them, and falls back to
    checking when its broker user may not (a broker set up by hand with per-host users)."""
    import pika.exceptions

    channel = open_channel()
    if joined:
        declare_shared(channel, queue_type, passive=True)
        return channel
    try:
        declare_shared(channel, queue_type)
        return channel
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code != 403:
            raise
    channel = open_channel()
    declare_shared(channel, queue_type, passive=True)
    return channel


def _conflict_hint(obj: Exchange | Queue) -> str:
    if isinstance(obj, Exchange):
        return (
            f"bridge needs {obj.name} to be a {obj.type} exchange: with no gateway running, "
            f"delete the old one (`rabbitmqadmin delete exchange name={obj.name}` or the "
            "management UI) and start again"
        )
    return (
        "rebuild it in the new type, keeping its messages, with `bridge broker migrate-queues` (gateways "
        "stopped), delete the old object (e.g. `rabbitmqctl delete_queue NAME`) or change the "
        "setting back (messaging.inbox_queue_type)"
    )
