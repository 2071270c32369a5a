"""Who a local request speaks as: the sender it names, or this host's default identity,
registered on first use. Shared by the operations of the local API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridgecli.gateway import registration

if TYPE_CHECKING:
    from bridgecli import messaging
    from bridgecli.gateway.daemon import Gateway
    from bridgecli.interfaces import Entity


class WouldWait(Exception):
    """A request run on the loop thread, which must never wait, met a step that waits (a first
    registration, a roster still filling); its whole operation then runs on a worker thread."""


def register_and_serve(gw: Gateway, **fields: Any) -> Entity:
    """Store an entity and start serving it (its inbox consumed, its presence announced)."""
    entity = registration.register(gw.registry, gw.plugins, gw.config, grants=gw.grants, **fields)
    try:
        gw.on_io(lambda: gw.attach_entity(entity))
    except Exception:
        gw.registry.remove(entity.gid)
        raise
    return entity


def speaker(gw: Gateway, given: str | None, result: dict[str, Any], may_wait: bool = True) -> messaging.Identity:
    """Who speaks (:func:`bridgecli.sender.resolve`); a default identity registered just now
    is reported in ``result["registered"]`` for the client to tell its user. Without
    ``may_wait``, a registration raises :class:`WouldWait` instead."""
    from bridgecli import sender

    def register(**fields: Any) -> Entity:
        if not may_wait:
            raise WouldWait("registering the default identity waits for the I/O thread")
        return register_and_serve(gw, **fields)

    identity, created = sender.resolve(gw.registry, given, host_id=gw.host, register=register)
    if created is not None:
        result["registered"] = {"gid": created.gid, "label": created.label}
    return identity
