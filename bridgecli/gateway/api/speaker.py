"""Who a local request speaks as: the sender it names, or this host's default identity,
registered on first use. Shared by the operations of the local API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridgecli.gateway.api.contract import ApiGateway, WouldWait

if TYPE_CHECKING:
    from bridgecli import messaging
    from bridgecli.interfaces import Entity


def speaker(gw: ApiGateway, given: str | None, result: dict[str, Any], may_wait: bool = True) -> messaging.Identity:
    """Who speaks (:func:`bridgecli.sender.resolve`); a default identity registered just now
    is reported in ``result["registered"]`` for the client to tell its user. Without
    ``may_wait``, a registration raises :class:`WouldWait` instead."""
    from bridgecli import sender

    def register(**fields: Any) -> Entity:
        if not may_wait:
            raise WouldWait("registering the default identity waits for the I/O thread")
        return gw.add_entity(**fields)

    identity, created = sender.resolve(gw.registry, given, host_id=gw.host, register=register)
    if created is not None:
        result["registered"] = {"gid": created.gid, "label": created.label}
    return identity
