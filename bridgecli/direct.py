"""The one-shot commands' path when no local gateway is running: talk to the broker directly.

Slower than the gateway's socket (this imports pika and opens a connection per command)
but it needs nothing running on the host, which is what scripts on a fresh machine want.
"""

from __future__ import annotations

from typing import Any, Callable

from bridgecli import messaging
from bridgecli.amqp import topology
from bridgecli.config import Config
from bridgecli.envelope import Envelope
from bridgecli.errors import BridgeError, BrokerUnavailable, Timeout
from bridgecli.hoststate.entities import Entity, Registry
from bridgecli.hoststate.store import Store


def _dlq(config: Config):
    return topology.dead_letter_queue(config.values["messaging.inbox_queue_type"])


def _open(config: Config, name: str):
    from bridgecli.amqp.connection import connect

    return connect(config, name=name, heartbeat=0)


def declare_inbox(config: Config, entity: Entity) -> None:
    """Declare the entity's inbox now, so messages sent before its gateway starts are kept."""
    connection = _open(config, "bridge-register")
    try:
        channel = connection.channel()
        topology.declare(channel, *topology.SHARED_EXCHANGES, _dlq(config),
                         topology.inbox_queue(entity.gid, config.values["messaging.inbox_queue_type"],
                                              config.values["messaging.max_attempts"]))
    finally:
        connection.close()


def register_entity(config: Config, registry: Registry, plugins: Any, *, label: str, role: str,
                    deliver: str) -> tuple[Entity, BridgeError | None]:
    """Register an entity without a gateway: store it, claim its gid at the hub (if joined)
    and declare its inbox. An unreachable broker or hub does not undo the registration (the
    gateway declares the inbox when it starts): that problem is returned for the caller to
    report; any other failure removes the entity again and is raised."""
    from bridgecli.gateway import registration
    from bridgecli.hub.claims import claimer_for

    entity = registration.register(registry, plugins, config, label=label, role=role, deliver=deliver)
    grants = claimer_for(config)
    problem: BridgeError | None = None
    try:
        if grants is not None:
            grants.claim([entity])
        declare_inbox(config, entity)
    except (BrokerUnavailable, Timeout) as exc:
        problem = exc
    except Exception:
        registry.remove(entity.gid)
        raise
    finally:
        if grants is not None:
            grants.close()
    return entity, problem


def remove_inbox(config: Config, entity: Entity) -> int:
    """Dead-letter what is left in the inbox (nothing is lost) and delete it."""
    from bridgecli.amqp.publisher import Publisher
    from bridgecli.gateway.deadletter import drain_to_dlq

    connection = _open(config, "bridge-unregister")
    try:
        channel = connection.channel()
        topology.declare(channel, *topology.SHARED_EXCHANGES, _dlq(config))
        publisher = Publisher(connection.channel())
        moved = drain_to_dlq(channel, publisher, topology.inbox_name(entity.gid), "recipient_unregistered",
                             f"entity {entity.label} was unregistered")
        if channel.is_open:
            channel.queue_delete(topology.inbox_name(entity.gid))
        return moved
    finally:
        connection.close()


def publish(config: Config, envelopes: list[Envelope], delay_ms: int | None = None) -> None:
    """Publish with confirms + mandatory on a short-lived connection."""
    from bridgecli.amqp.publisher import Publisher

    connection = _open(config, "bridge-send")
    try:
        channel = connection.channel()
        topology.declare(channel, *topology.SHARED_EXCHANGES, _dlq(config))
        if delay_ms:
            _declare_delay(connection, channel, delay_ms)
        publisher = Publisher(channel, user_id=connection._impl.params.credentials.username)
        for envelope in envelopes:
            publisher.publish(envelope, delay_ms=delay_ms)
    finally:
        if connection.is_open:
            connection.close()


def _declare_delay(connection: Any, channel: Any, delay_ms: int) -> None:
    """``bridge.delay`` and the TTL tier of ``delay_ms``, exactly as a gateway declares them
    (one delay mechanism everywhere; another ``bridge.delay`` is a Conflict)."""
    topology.declare(channel, topology.DELAY_EXCHANGE, topology.delay_queue(delay_ms))


def resolve_recipient(config: Config, registry: Registry, target: str, *, force: bool = False) -> str:
    """``target`` as a gid without a local gateway. A full gid, or a label of exactly one
    entity of this host, needs nothing more: the publish is mandatory, so the broker itself
    says when no inbox has that gid (exit 9), without waiting for the roster. Only a label
    of another host is looked up in the roster, heard for one interval on ``bridge.roster``
    like ``bridge roster`` does without a gateway."""
    from bridgecli.envelope import is_uuid
    from bridgecli.resolve import resolve_target

    wanted = target.strip()
    lowered = wanted.lower()
    if is_uuid(lowered):
        return resolve_target(wanted, registry=registry, roster=None, force=True)
    if not wanted or sum(e.label == wanted for e in registry.all()) == 1:
        return resolve_target(wanted, registry=registry, roster=None, force=force)
    from bridgecli.control_client import listen_roster

    view = listen_roster(config, config.values["roster.interval"] + 0.5)
    return resolve_target(wanted, registry=registry, roster=view, force=force)


def send(config: Config, registry: Registry, store: Store, *, command: str, contents: list[str],
         identity: Callable[[], messaging.Identity], target: str | None = None, msg_id: str | None = None,
         delay: float | None = None, force: bool = False, turn: str | None = None,
         new_id: str | None = None) -> list[Envelope]:
    """Compose and publish as ``identity()`` (see :func:`bridgecli.sender.resolve`), called
    once the recipient is known, so that a mistyped target registers no default identity."""
    in_reply_to = None
    if command in ("reply", "answer"):
        original = messaging.original_message(store, msg_id or "")
        recipient, in_reply_to, turn = original.sender, original.msg_id, turn or original.turn
    else:
        recipient = resolve_recipient(config, registry, target or "", force=force)
    sender = identity()
    envelopes = [messaging.compose(messaging.KIND_FOR_COMMAND[command], sender, recipient, content,
                                   host=config.host_id, max_content_bytes=config.values["messaging.max_content_bytes"],
                                   in_reply_to=in_reply_to, turn=turn, msg_id=new_id) for content in contents]
    publish(config, envelopes, int(delay * 1000) if delay else None)
    return envelopes


__all__ = ["send", "register_entity", "resolve_recipient", "publish", "declare_inbox", "remove_inbox",
           "BrokerUnavailable"]
