"""The one-shot commands' path when no local gateway is running: talk to the broker directly.

:class:`DirectSession` serves the request models the gateway serves over its socket.

Slower than the gateway's socket (this imports pika and opens a connection per command)
but it needs nothing running on the host, which is what scripts on a fresh machine want.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

from bridgecli import messaging, results
from bridgecli.amqp import topology
from bridgecli.config import Config
from bridgecli.envelope import Envelope
from bridgecli.errors import BridgeError, BrokerUnavailable, GatewayUnavailable, Timeout, Unconfirmed
from bridgecli.hoststate.entities import Entity, Registry, open_registry
from bridgecli.hoststate.store import Store, open_store
from bridgecli.hoststate.wire import entity_dict, message_dict
from bridgecli.requests import (
    PollRequest,
    RegisterRequest,
    RosterRequest,
    SendRequest,
    ShowRequest,
    SpawnRequest,
    StopRequest,
    UnregisterRequest,
)


def _shared_channel(config: Config, connection: Any) -> Any:
    """A channel of ``connection`` on which bridge's shared objects are known to exist."""
    return topology.ensure_shared(
        connection.channel, config.values["messaging.inbox_queue_type"], joined=bool(config.values.get("hub.id"))
    )


def _open(config: Config, name: str):
    from bridgecli.amqp.connection import connect

    return connect(config, name=name, heartbeat=0)


def declare_inbox(config: Config, entity: Entity) -> None:
    """Declare the entity's inbox now, so messages sent before its gateway starts are kept."""
    connection = _open(config, "bridge-register")
    try:
        channel = _shared_channel(config, connection)
        topology.declare(
            channel,
            topology.inbox_queue(
                entity.gid, config.values["messaging.inbox_queue_type"], config.values["messaging.max_attempts"]
            ),
        )
    finally:
        connection.close()


def register_entity(
    config: Config, registry: Registry, plugins: Any, *, label: str, role: str, deliver: str
) -> tuple[Entity, BridgeError | None]:
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
        channel = _shared_channel(config, connection)
        publisher = Publisher(connection.channel())
        moved = drain_to_dlq(
            channel,
            publisher,
            topology.inbox_name(entity.gid),
            "recipient_unregistered",
            f"entity {entity.label} was unregistered",
        )
        if channel.is_open:
            channel.queue_delete(topology.inbox_name(entity.gid))
        return moved
    finally:
        connection.close()


def publish(config: Config, envelopes: list[Envelope], delay_ms: int | None = None) -> None:
    """Publish with confirms + mandatory on a short-lived connection. The connection lost
    once a message may have gone out is :class:`~bridgecli.errors.Unconfirmed` (resending
    the same ids is safe); before that, :class:`~bridgecli.errors.BrokerUnavailable`."""
    import pika.exceptions

    from bridgecli.amqp import connection as amqp_conn
    from bridgecli.amqp.publisher import Publisher, describe

    connection = _open(config, "bridge-send")
    sending: Envelope | None = None
    try:
        channel = _shared_channel(config, connection)
        if delay_ms:
            _declare_delay(channel, config.host_id, delay_ms)
        publisher = Publisher(channel, user_id=amqp_conn.username(config))
        for sending in envelopes:
            publisher.publish(sending, delay_ms=delay_ms)
    except (*amqp_conn.CONNECTION_ERRORS, pika.exceptions.AMQPError) as exc:
        lost = f"lost the broker connection ({type(exc).__name__})"
        if sending is None:
            raise BrokerUnavailable(f"{lost} before sending", "retry in a moment") from None
        raise Unconfirmed(
            f"{lost} before the broker confirmed {describe(sending)}",
            "it may or may not have been delivered: resend with the same --id or --key (a repeat is dropped)",
        ) from None
    finally:
        if connection.is_open:
            connection.close()


def _declare_delay(channel: Any, host: str, delay_ms: int) -> None:
    """This host's delay exchange and the TTL tier of ``delay_ms``, exactly as a gateway
    declares them (one delay mechanism everywhere)."""
    topology.declare(channel, topology.delay_exchange(host), topology.delay_queue(host, delay_ms))


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


def send(
    config: Config,
    registry: Registry,
    store: Store,
    request: SendRequest,
    identity: Callable[[str | None], messaging.Identity],
) -> list[Envelope]:
    """Compose and publish ``request`` as ``identity(name)`` (``name``: see
    :func:`bridgecli.sender.named`), called once the recipient is known, so that a mistyped
    target registers no default identity."""
    from bridgecli import sender

    to = messaging.address(
        request, store, lambda target, force: resolve_recipient(config, registry, target, force=force)
    )
    speaker = identity(sender.named(request.sender, to.delivered_to, registry))
    envelopes = messaging.compose_request(
        request, speaker, to, host=config.host_id, max_content_bytes=config.values["messaging.max_content_bytes"]
    )
    publish(config, envelopes, request.delay_ms)
    return envelopes


class DirectSession:
    """The host session (:class:`bridgecli.session.HostSession`) without a gateway: the host's
    registry and store, and a short broker connection per publish. Results are built from the
    objects the gateway answers with (:mod:`bridgecli.hoststate.wire`); what only a gateway can
    do (wait for a reply) is a clear error, and a degraded outcome (a poll that cannot wait,
    an inbox not declared yet) goes to ``warn``."""

    def __init__(self, config: Config, warn: Callable[[str], None]) -> None:
        self.config = config
        self.warn = warn

    @cached_property
    def registry(self) -> Registry:
        """Opened on first use: ``bridge roster`` never needs it."""
        return open_registry()

    def _sender(self, given: str | None) -> tuple[messaging.Identity, dict[str, Any]]:
        """The sender (:func:`bridgecli.sender.resolve`), and the result field ``registered``
        (``{}`` unless a default identity was registered just now, as the gateway reports it)."""
        from bridgecli import plugins, sender

        def register(**fields: str) -> Entity:
            entity, problem = register_entity(self.config, self.registry, plugins.get(), **fields)
            if problem is not None:
                self.warn(
                    f"registered {entity.label}, but its inbox is not declared yet ({problem.message}); "
                    "the gateway declares it when it starts"
                )
            return entity

        identity, created = sender.resolve(self.registry, given, host_id=self.config.host_id, register=register)
        return identity, ({"registered": {"gid": created.gid, "label": created.label}} if created else {})

    def send(self, request: SendRequest) -> results.SendResult:
        if request.wait:
            raise GatewayUnavailable(
                "--wait needs the local gateway (it collects the reply from your inbox)",
                "start `bridge gateway`, or send without --wait and `bridge poll` later",
            )
        registered: dict[str, Any] = {}

        def identity(given: str | None) -> messaging.Identity:
            found, reported = self._sender(given)
            registered.update(reported)
            return found

        envelopes = send(self.config, self.registry, open_store(self.config), request, identity)
        if request.bulk:
            result = {"msgIds": [e.msg_id for e in envelopes], "to": envelopes[0].recipient if envelopes else None}
        else:
            result = {"msgId": envelopes[0].msg_id, "to": envelopes[0].recipient, "kind": envelopes[0].kind}
        return results.SendResult.from_wire({**result, **registered})

    def register(self, request: RegisterRequest) -> results.RegisterResult:
        from bridgecli import plugins

        entity, problem = register_entity(
            self.config, self.registry, plugins.get(), label=request.label, role=request.role, deliver=request.deliver
        )
        if problem is not None:
            self.warn(
                f"registered, but the inbox is not declared yet ({problem.message}); "
                "the gateway declares it when it starts"
            )
        return results.RegisterResult.from_wire({"entity": entity_dict(entity)})

    def unregister(self, request: UnregisterRequest) -> results.UnregisterResult:
        from bridgecli.gateway import registration
        from bridgecli.hub.claims import claimer_for

        entity = self.registry.resolve(request.target)
        try:
            moved = remove_inbox(self.config, entity)
        except BrokerUnavailable as exc:
            raise BrokerUnavailable(
                f"cannot unregister {entity.label}: {exc.message}",
                "its inbox may hold messages; start the broker and retry",
            ) from None
        self.registry.remove(entity.gid)
        grants = claimer_for(self.config)
        registration.release(grants, entity)
        if grants is not None:
            grants.close()
        return results.UnregisterResult.from_wire({"entity": entity_dict(entity), "dead_lettered": moved})

    def poll(self, request: PollRequest) -> results.PollResult:
        from bridgecli.resolve import resolve_target

        if request.wait:
            self.warn("no local gateway: returning what is held now, without waiting")
        peer_gid = (
            resolve_target(request.peer, registry=self.registry, roster=None, force=True) if request.peer else None
        )
        identity, registered = self._sender(request.gid)
        store = open_store(self.config)
        if request.peek:
            messages = store.peek(identity.gid, limit=int(request.limit), sender=peer_gid)
        else:
            messages = store.drain(identity.gid, limit=int(request.limit), sender=peer_gid)
        result = {"gid": identity.gid, "messages": [message_dict(m) for m in messages], **registered}
        if peer_gid:
            result["peer"] = peer_gid
        return results.PollResult.from_wire(result)

    def show(self, request: ShowRequest) -> results.ShowResult:
        store = open_store(self.config)
        original = messaging.original_message(store, request.msg_id)
        return results.ShowResult.from_wire({"message": message_dict(store.get(original.msg_id) or original)})

    def spawn(self, request: SpawnRequest) -> results.SpawnResult:
        from bridgecli import control_client

        requester = self._requester(request.sender)
        view = self._hear_roster()
        control_client.require_live_host(view, request.host)
        answer = control_client.spawn(
            self.config,
            profile=request.profile,
            host=request.host,
            label=request.label,
            wait_ready=request.wait_ready,
            requester=requester,
            prompt=request.prompt,
        )
        return results.SpawnResult.from_wire(answer)

    def stop(self, request: StopRequest) -> results.StopResult:
        from bridgecli import control_client
        from bridgecli.errors import NotFound
        from bridgecli.resolve import resolve_target

        requester = self._requester(request.sender)
        view = self._hear_roster()
        gid = resolve_target(request.target, registry=self.registry, roster=view, force=True)
        entry = view.get(gid)
        if entry is None:
            raise NotFound(f"{request.target!r} is not in the roster, so its host is unknown", "check `bridge roster`")
        control_client.require_live_host(view, entry.host)
        answer = control_client.request(
            self.config, entry.host, {"type": "stop", "gid": gid, "requester": requester}, timeout=30
        )
        return results.StopResult.from_wire(answer)

    def roster(self, request: RosterRequest) -> results.RosterResult:
        view = self._hear_roster()
        return results.RosterResult.from_wire(
            {
                "entries": [e.as_dict() for e in view.entries(request.host)],
                "gateways": [g.__dict__ for g in view.gateways()],
                "interval": self.config.values["roster.interval"],
                "hosts": view.hosts(),
                "relay": view.relay.info(),
            }
        )

    def _requester(self, sender: str | None) -> dict[str, Any]:
        """No local gateway to ask: ``--from`` / ``BRIDGE_GID`` still travel (and are logged there)."""
        from bridgecli import control_client

        return control_client.requester_identity(self.registry, sender, self.config.host_id)

    def _hear_roster(self) -> Any:
        """The roster heard on ``bridge.roster`` for one interval (no gateway keeps one here)."""
        from bridgecli import control_client

        return control_client.listen_roster(self.config, self.config.values["roster.interval"] + 0.5)

    def confirm(self, result: results.SendResult | results.PollResult) -> None:
        """Nothing to confirm: a direct poll drains at once (there is no gateway to hold again)."""

    def close(self) -> None:
        """Nothing is kept open between requests."""

    def __enter__(self) -> DirectSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "DirectSession",
    "send",
    "register_entity",
    "resolve_recipient",
    "publish",
    "declare_inbox",
    "remove_inbox",
    "BrokerUnavailable",
]
