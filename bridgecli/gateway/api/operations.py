"""What the local API can do: each operation is a function ``op(gateway, **params) -> dict``,
where the gateway is the :class:`~.contract.ApiGateway` contract and nothing more.

Each one-shot operation reads its request model (:mod:`bridgecli.requests`) from the wire;
the CLI's direct path (:mod:`bridgecli.direct`) serves the same models without a gateway
and shares the composing code in :mod:`bridgecli.messaging`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from bridgecli import __version__, messaging
from bridgecli import roster as roster_mod
from bridgecli.amqp.connection import redact
from bridgecli.errors import NotFound as NotFoundError
from bridgecli.gateway.api.answers import ANSWERED, PENDING, EarlyAnswer
from bridgecli.gateway.api.channel_ops import op_channel_join, op_channel_leave, op_channel_list
from bridgecli.gateway.api.contract import ApiGateway
from bridgecli.gateway.api.history_ops import op_history, op_thread
from bridgecli.gateway.api.polling import op_poll
from bridgecli.gateway.api.sending import LOOK_EVERY, MAX_WAIT, op_send
from bridgecli.gateway.api.speaker import speaker
from bridgecli.gateway.api.tracking_ops import op_activity, op_receipts, op_track
from bridgecli.gids import short
from bridgecli.hoststate.wire import entity_dict, message_dict
from bridgecli.requests import (
    RegisterRequest,
    RosterRequest,
    SpawnRequest,
    StopRequest,
    UnregisterRequest,
)

#: the operations given an ``early`` parameter (:class:`.answers.EarlyAnswer`) by the local API
ANSWERING = frozenset({"send", "poll"})


def op_status(gw: ApiGateway) -> dict[str, Any]:
    from bridgecli.amqp.uri import resolve_broker_uri

    depths: dict[str, int] = {}
    store_mode = None
    if gw.is_connected():
        try:
            depths = gw.call_after_step(gw.queue_depths, timeout=5)
            # on the I/O thread's own connection: the one whose commits precede the acks
            store_mode = gw.call_after_step(gw.store.synchronous, timeout=5)
        except Exception:
            depths = {}
    elsewhere = set(gw.consumed_by_others())
    waiting = [w.recipient for w in gw.waiters]
    entities = []
    for entity in gw.registry.all():
        row = entity_dict(entity)
        row["held"] = gw.store.held_count(entity.gid)
        row["ready"] = depths.get(f"agent.{entity.gid}.inbox")
        row["consuming"] = gw.consuming(entity.gid)
        #: another client consumes this inbox (a clone of this host?)
        row["elsewhere"] = f"agent.{entity.gid}.inbox" in elsewhere
        #: blocked `poll --wait` / `send --wait` calls of this entity right now
        row["waiting"] = waiting.count(entity.gid)
        entities.append(row)
    try:
        uris = [redact(u) for u in resolve_broker_uri(gw.config)]
    except Exception:
        uris = []
    return {
        "host": gw.host,
        "version": __version__,
        "pid": os.getpid(),
        "uptime": round(time.time() - gw.started, 1),
        "broker": {
            "connected": gw.is_connected(),
            "publishing": gw.can_publish(),
            "uris": uris,
            "server": gw.broker_server(),
        },
        "store": {"synchronous": store_mode, "sync_before_ack": True, "syncs": gw.store.syncs},
        "elsewhere": sorted(elsewhere),
        "entities": entities,
        "dedup_size": gw.store.size(),
        "dlq_depth": depths.get("bridge.dlq"),
        "extra": gw.extra_status(),
    }


def op_register(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    request = RegisterRequest.from_wire(wire)
    return {
        "entity": entity_dict(
            gw.add_entity(
                label=request.label,
                role=request.role,
                deliver=request.deliver,
                gid=request.gid,
                launcher=request.launcher,
                launch_data=request.launch_data,
            )
        )
    }


def op_unregister(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    entity = gw.registry.resolve(UnregisterRequest.from_wire(wire).target)
    moved = gw.remove_entity(entity)
    return {"entity": entity_dict(entity), "dead_lettered": moved}


def op_entities(gw: ApiGateway) -> dict[str, Any]:
    rows = []
    for entity in gw.registry.all():
        row = entity_dict(entity)
        row["held"] = gw.store.held_count(entity.gid)
        rows.append(row)
    return {"entities": rows}


def op_resolve(gw: ApiGateway, target: str, force: bool = False) -> dict[str, Any]:
    return {"gid": gw.resolve_target(target, force=force)}


def op_confirm(gw: ApiGateway, msg_ids: list[str]) -> dict[str, Any]:
    """The client has the messages a ``confirm`` poll or send handed it (see :data:`PENDING`)."""
    ids = [str(m) for m in msg_ids]
    return {"confirmed": gw.store.confirm(ids), "confirmedIds": ids}


def op_ack(gw: ApiGateway, msg_ids: list[str], gid: str | None = None) -> dict[str, Any]:
    """Confirm messages returned by ``poll`` with ``peek``: they leave the hold, and their
    senders learn they were read (``bridge_poll`` pulls this way)."""
    registered: dict[str, Any] = {}
    identity = speaker(gw, gid, registered)
    acked = gw.store.ack(identity.gid, list(msg_ids))
    if acked and gw.tracking.enabled:
        found = [gw.store.get(str(m)) for m in msg_ids]
        pulled = [s.envelope for s in found if s is not None and s.envelope.recipient == identity.gid]
        gw.tracking.read([(e.msg_id, e.recipient, e.sender_host) for e in pulled], "poll")
    return {"gid": identity.gid, "acked": acked, **registered}


def op_held(gw: ApiGateway, gid: str | None = None, wait: float = 0.0, baseline: int | None = None) -> dict[str, Any]:
    """How many messages are held for an entity, without draining them. With ``wait``,
    block until at least one is — or, given ``baseline``, until the count differs from it
    (the MCP server uses this to push notifications without re-polling)."""
    registered: dict[str, Any] = {}
    identity = speaker(gw, gid, registered)
    deadline = time.monotonic() + min(float(wait or 0), MAX_WAIT)
    waiter = gw.waiters.add(identity.gid) if wait else None
    try:
        while True:
            count = gw.store.held_count(identity.gid)
            changed = count != baseline if baseline is not None else count > 0
            if changed or waiter is None or time.monotonic() >= deadline:
                return {"gid": identity.gid, "held": count, "oldest": gw.store.oldest_held(identity.gid), **registered}
            waiter.wait(min(deadline - time.monotonic(), LOOK_EVERY))
    finally:
        if waiter is not None:
            gw.waiters.remove(waiter)


def op_show(gw: ApiGateway, msg_id: str) -> dict[str, Any]:
    original = messaging.original_message(gw.store, msg_id)
    stored = gw.store.get(original.msg_id)
    return {"message": message_dict(stored or original)}


def op_roster(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    host = RosterRequest.from_wire(wire).host
    view = gw.roster
    if view is None:
        return {"entries": [], "gateways": [], "interval": None, "hosts": [], "local_host": gw.host, "relay": None}
    return {
        "entries": [e.as_dict() for e in view.entries(host)],
        "gateways": [g.__dict__ for g in view.gateways()],
        "interval": gw.config.values["roster.interval"],
        # how fresh the view is, per host (docs/roster.md): `bridge roster` and `bridge doctor`
        "hosts": view.hosts(),
        "local_host": gw.host,
        # how other hosts are heard: through a roster relay or directly (docs/roster.md)
        "relay": view.relay.info(),
    }


def op_spawn(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    from bridgecli import control_client

    request = SpawnRequest.from_wire(wire)
    gw.once_roster_complete(lambda: control_client.require_live_host(gw.roster, request.host))
    result = control_client.spawn(
        gw.config,
        profile=request.profile,
        host=request.host,
        label=request.label,
        wait_ready=float(request.wait_ready) if request.wait_ready else None,
        requester=_requester(gw, request.sender),
        prompt=request.prompt,
    )
    # the answer can overtake the new entity's first heartbeat: put it in our view now, so
    # `bridge send <new gid>` right after `bridge spawn` is not refused as unannounced
    if gw.roster is not None:
        gw.roster.add_if_absent(roster_mod.spawned_entry(result, interval=gw.config.values["roster.interval"]))
    return result


def op_stop(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    from bridgecli import control_client

    request = StopRequest.from_wire(wire)
    target, sender = request.target, request.sender

    def owner() -> tuple[str, str]:
        gid = gw.resolve_target(target, force=True)
        entry = gw.roster.get(gid) if gw.roster is not None else None
        local = gw.registry.get(gid)
        host = local.host if local else (entry.host if entry else None)
        if host is None:
            raise NotFoundError(f"{target!r} is not in the roster, so its host is unknown", "check `bridge roster`")
        control_client.require_live_host(gw.roster, host)
        return gid, host

    gid, host = gw.once_roster_complete(owner)
    payload = {"type": "stop", "gid": gid, "requester": _requester(gw, sender)}
    return control_client.request(gw.config, host, payload, timeout=30)


def _requester(gw: ApiGateway, sender: str | None) -> dict[str, Any]:
    from bridgecli.control_client import requester_identity

    return requester_identity(gw.registry, sender, gw.host)


OPS: dict[str, Callable[..., dict[str, Any]]] = {
    "status": op_status,
    "register": op_register,
    "unregister": op_unregister,
    "entities": op_entities,
    "resolve": op_resolve,
    "send": op_send,
    "poll": op_poll,
    "show": op_show,
    "held": op_held,
    "ack": op_ack,
    "confirm": op_confirm,
    "roster": op_roster,
    "spawn": op_spawn,
    "stop": op_stop,
    "track": op_track,
    "seen": op_activity,
    "activity": op_activity,
    "receipts": op_receipts,
    "history": op_history,
    "thread": op_thread,
    "channel_join": op_channel_join,
    "channel_leave": op_channel_leave,
    "channel_list": op_channel_list,
}

__all__ = ["ANSWERED", "OPS", "PENDING", "EarlyAnswer", "entity_dict", "message_dict", "short"]
