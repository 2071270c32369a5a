"""The channel operations of the local API: ``channel_join``, ``channel_leave`` and
``channel_list``. Why apart from :mod:`.operations`: they change memberships (the registry,
the broker's bindings, the roster) and read the fleet's view of every host's members.
"""

from __future__ import annotations

from typing import Any

from bridgecli.gateway.api.contract import ApiGateway
from bridgecli.gateway.api.speaker import speaker
from bridgecli.interfaces import Entity
from bridgecli.requests import ChannelListRequest, ChannelRequest, LeaveRequest


def op_channel_join(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    """``member`` joins channel ``name`` (:class:`~bridgecli.requests.ChannelRequest`); says
    whether it was new. The default identity is registered on first use, as for a send."""
    request = ChannelRequest.from_wire(wire)
    result: dict[str, Any] = {"channel": request.name}
    entity = _member(gw, request.member, result)
    result["joined"] = gw.memberships.join(entity, request.name)
    result["member"] = {"gid": entity.gid, "label": entity.label}
    return result


def op_channel_leave(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    """``member`` leaves channel ``name`` (:class:`~bridgecli.requests.LeaveRequest`)."""
    request = LeaveRequest.from_wire(wire)
    result: dict[str, Any] = {"channel": request.name}
    entity = _member(gw, request.member, result)
    gw.memberships.leave(entity, request.name)
    result["member"] = {"gid": entity.gid, "label": entity.label}
    return result


def op_channel_list(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    """Every channel and its members on every host (:class:`~bridgecli.requests.ChannelListRequest`):
    this host's from its registry, the others' from the roster. Sorted by name, then host
    and label."""
    request = ChannelListRequest.from_wire(wire)
    members: dict[str, dict[str, dict[str, Any]]] = {}

    def add(name: str, gid: str, label: str, host: str) -> None:
        if request.name is None or name == request.name:
            members.setdefault(name, {})[gid] = {"gid": gid, "label": label, "host": host}

    local = gw.registry.channels()
    for entity in gw.registry.all():
        for name in local.get(entity.gid, ()):
            add(name, entity.gid, entity.label, gw.host)
    if gw.roster is not None:
        for entry in gw.roster.entries():
            if entry.host != gw.host:
                for name in entry.channels:
                    add(name, entry.gid, entry.label, entry.host)
    names = sorted(members) if request.name is None else [request.name]
    return {
        "channels": [
            {
                "name": name,
                "members": sorted(members.get(name, {}).values(), key=lambda m: (m["host"], m["label"], m["gid"])),
            }
            for name in names
        ]
    }


def _member(gw: ApiGateway, given: str | None, result: dict[str, Any]) -> Entity:
    """The local entity a channel request is for: ``given``, else the default identity."""
    identity = speaker(gw, given, result)
    entity = gw.registry.get(identity.gid)
    if entity is None:
        from bridgecli.errors import NotFound

        raise NotFound(
            f"{identity.gid} is not an entity of this host",
            "only this host's entities join its channels: pass --as LABEL of one here",
        )
    return entity
