"""What the local API can do: each operation is a function ``op(gateway, **params) -> dict``.

Each one-shot operation reads its request model (:mod:`bridgecli.requests`) from the wire;
the CLI's direct path (:mod:`bridgecli.direct`) serves the same models without a gateway
and shares the composing code in :mod:`bridgecli.messaging`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from bridgecli import __version__, messaging
from bridgecli import roster as roster_mod
from bridgecli.amqp.connection import redact
from bridgecli.errors import NotFound as NotFoundError
from bridgecli.errors import Timeout
from bridgecli.gateway import registration
from bridgecli.hoststate.entities import short
from bridgecli.hoststate.store import DELIVERED, DRAINED, TAKEN
from bridgecli.hoststate.wire import entity_dict, message_dict
from bridgecli.requests import (
    PollRequest,
    RegisterRequest,
    RosterRequest,
    SendRequest,
    SpawnRequest,
    StopRequest,
    UnregisterRequest,
)

if TYPE_CHECKING:
    from concurrent.futures import Future

    from bridgecli.gateway.daemon import Gateway
    from bridgecli.hoststate.store import StoredMessage

MAX_WAIT = 24 * 3600.0
#: a waiting request looks for its messages at least this often (seconds), woken or not
LOOK_EVERY = 1.0
#: response field: ids the client must confirm (op ``confirm``) once it has the messages;
#: the local API holds them again when the connection ends without that
PENDING = "pending"
#: how long a publish may wait for the broker's confirm (as ``Gateway.publish``)
CONFIRM_TIMEOUT = 30.0
#: response field: the answer already went out (:class:`EarlyAnswer`); nothing more to write
ANSWERED = "answered"
#: the operations given an ``early`` parameter (:class:`EarlyAnswer`) by the local API
ANSWERING = frozenset({"send", "poll"})
#: messages with more content than this are answered by the request's own thread: the thread
#: that hands them over must not spend its time encoding them
EARLY_MAX = 64 * 1024


class EarlyAnswer(Protocol):
    """A client connection's way to answer its waiting request from another thread."""

    def answer(self, result: dict[str, Any]) -> bool:
        """Write ``result`` without blocking (its thread writes the rest); False: nothing written."""


def op_status(gw: Gateway) -> dict[str, Any]:
    from bridgecli.amqp.uri import resolve_broker_uri

    depths: dict[str, int] = {}
    store_mode = None
    if gw.connected.is_set():
        try:
            depths = gw.on_io(gw.queue_depths, timeout=5)
            # on the I/O thread's own connection: the one whose commits precede the acks
            store_mode = gw.on_io(gw.store.synchronous, timeout=5)
        except Exception:
            depths = {}
    entities = []
    for entity in gw.registry.all():
        row = entity_dict(entity)
        row["held"] = gw.store.held_count(entity.gid)
        row["ready"] = depths.get(f"agent.{entity.gid}.inbox")
        row["consuming"] = entity.gid in gw.consumers and gw.consumers[entity.gid].tag is not None
        #: another client consumes this inbox (see Gateway.consumed_elsewhere)
        row["elsewhere"] = f"agent.{entity.gid}.inbox" in gw.elsewhere
        #: blocked `poll --wait` / `send --wait` calls of this entity right now
        row["waiting"] = sum(1 for w in list(gw.waiters) if w.recipient == entity.gid)
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
            "connected": gw.connected.is_set(),
            "publishing": gw.lane.ready.is_set(),
            "uris": uris,
            "server": gw.lane.server_info,
        },
        "store": {"synchronous": store_mode, "sync_before_ack": True, "syncs": gw.store.syncs},
        "elsewhere": sorted(list(gw.elsewhere)),
        "entities": entities,
        "dedup_size": gw.store.size(),
        "dlq_depth": depths.get("bridge.dlq"),
        "extra": {name: fn() for name, fn in gw.status_extras.items()},
    }


def op_register(gw: Gateway, **wire: Any) -> dict[str, Any]:
    request = RegisterRequest.from_wire(wire)
    return {
        "entity": entity_dict(
            _register(
                gw,
                label=request.label,
                role=request.role,
                deliver=request.deliver,
                gid=request.gid,
                launcher=request.launcher,
                launch_data=request.launch_data,
            )
        )
    }


def _register(gw: Gateway, **fields: Any) -> Any:
    """Store an entity and start serving it (its inbox consumed, its presence announced)."""
    entity = registration.register(gw.registry, gw.plugins, gw.config, grants=gw.grants, **fields)
    try:
        gw.on_io(lambda: gw.attach_entity(entity))
    except Exception:
        gw.registry.remove(entity.gid)
        raise
    return entity


def _sender(gw: Gateway, given: str | None, result: dict[str, Any]) -> messaging.Identity:
    """Who speaks (:func:`bridgecli.sender.resolve`); a default identity registered just now
    is reported in ``result["registered"]`` for the client to tell its user."""
    from bridgecli import sender

    identity, created = sender.resolve(
        gw.registry, given, host_id=gw.host, register=lambda **fields: _register(gw, **fields)
    )
    if created is not None:
        result["registered"] = {"gid": created.gid, "label": created.label}
    return identity


def op_unregister(gw: Gateway, **wire: Any) -> dict[str, Any]:
    entity = gw.registry.resolve(UnregisterRequest.from_wire(wire).target)
    moved = gw.on_io(lambda: gw.detach_entity(entity))
    gw.registry.remove(entity.gid)
    registration.release(gw.grants, entity)
    return {"entity": entity_dict(entity), "dead_lettered": moved}


def op_entities(gw: Gateway) -> dict[str, Any]:
    rows = []
    for entity in gw.registry.all():
        row = entity_dict(entity)
        row["held"] = gw.store.held_count(entity.gid)
        rows.append(row)
    return {"entities": rows}


def op_resolve(gw: Gateway, target: str, force: bool = False) -> dict[str, Any]:
    return {"gid": gw.resolve_target(target, force=force)}


def op_send(gw: Gateway, early: EarlyAnswer | None = None, **wire: Any) -> dict[str, Any]:
    """send/ask (to a TARGET) and reply/answer (to a received MSGID); optional wait
    (:class:`~bridgecli.requests.SendRequest`). With ``confirm`` the reply of a ``wait``
    stays recoverable until the client confirms it (op ``confirm``; it is held again if the
    client goes away first). ``early``: the reply may be answered from the commit."""
    request = SendRequest.from_wire(wire)
    to = messaging.address(request, gw.store, lambda target, force: gw.resolve_target(target, force=force))
    result: dict[str, Any] = {}
    identity = _sender(gw, request.sender, result)  # after the recipient: a mistyped target registers nothing
    envelopes = messaging.compose_request(request, identity, to, host=gw.host, max_content_bytes=gw.max_content)
    if request.bulk:
        gw.publish(envelopes, delay_ms=request.delay_ms, timeout=max(30.0, len(envelopes) * 0.05))
        return {
            "msgIds": [e.msg_id for e in envelopes],
            "to": to.recipient,
            "kind": envelopes[0].kind if envelopes else None,
            **result,
        }
    [envelope] = envelopes
    result = {"msgId": envelope.msg_id, "to": to.recipient, "kind": envelope.kind, **result}
    if not request.wait:
        gw.publish([envelope], delay_ms=request.delay_ms)
        return result
    waiter = gw.add_waiter(identity.gid, envelope.msg_id, claims=1, two_phase=request.confirm)
    try:
        [confirmed] = gw.lane.submit([envelope], delay_ms=request.delay_ms)

        def on_confirm(done: Future) -> None:
            # only a failed confirm ends the wait early: a successful one needs no wakeup (the
            # reply is what is waited for, and the timeout path waits for the confirm itself)
            if done.cancelled() or done.exception() is not None:
                waiter.event.set()

        confirmed.add_done_callback(on_confirm)
        started = time.monotonic()
        if early is not None and request.new_id is None:
            sent: list[dict[str, Any]] = []
            answer = _early_answer(
                early, lambda handed: _with_reply(result, message_dict(handed[0]), request.confirm), sent
            )
            if gw.wait_answering(waiter, answer, min(float(request.wait), LOOK_EVERY)):
                return _answered(sent[0])
        reply = _await_reply(
            gw,
            waiter,
            identity.gid,
            envelope.msg_id,
            float(request.wait),
            confirmed,
            look_first=request.new_id is not None,
            mark=TAKEN if request.confirm else DRAINED,
            started=started,
        )
        return _with_reply(result, reply, request.confirm)
    finally:
        gw.remove_waiter(waiter)


def _with_reply(result: dict[str, Any], reply: dict[str, Any], confirm: bool) -> dict[str, Any]:
    """A ``send --wait``'s response: ``result`` with its reply, pending if the client confirms."""
    out = {**result, "reply": reply}
    if confirm and reply.get("state") != DELIVERED:
        out[PENDING] = [reply["msgId"]]
    return out


def _early_answer(
    early: EarlyAnswer, build: Callable[[list[StoredMessage]], dict[str, Any]], sent: list[dict[str, Any]]
) -> Callable[[list[StoredMessage]], bool]:
    """The answer for :meth:`Gateway.wait_answering`: ``build``'s response to the handed messages
    (at most :data:`EARLY_MAX` of content), written through ``early`` and kept in ``sent``."""

    def answer(handed: list[StoredMessage]) -> bool:
        if sum(len(m.envelope.content) for m in handed) > EARLY_MAX:
            return False
        response = build(handed)
        written = early.answer(response)
        if written:
            sent.append(response)
        return written

    return answer


def _answered(response: dict[str, Any]) -> dict[str, Any]:
    """What an operation whose ``response`` went out early returns to the local API."""
    return {ANSWERED: True, **({PENDING: response[PENDING]} if PENDING in response else {})}


def _await_reply(
    gw: Gateway,
    waiter: Any,
    gid: str,
    msg_id: str,
    timeout: float,
    confirm: Future,
    look_first: bool = True,
    mark: str = DRAINED,
    started: float | None = None,
) -> dict[str, Any]:
    """Wait for the reply and the message's confirm *together*: a reply proves delivery, so
    once it is here the confirm no longer matters (a persistent message may be confirmed only
    after the broker's next disk sync). A failed confirm ends the wait with its error; at the
    timeout an unconfirmed message is waited for first, so "the reply will be held" is never
    said of a message the broker did not take. ``look_first=False`` for an id minted just now;
    ``started``: when the wait began (``time.monotonic()``; default now).
    """
    from bridgecli.gateway.publishing import await_confirm  # pika: not for the CLI's imports of this module

    started = time.monotonic() if started is None else started
    deadline = started + min(timeout, MAX_WAIT)
    look = look_first  # a resend with --id may find its reply here already; then when notified
    while True:
        if look:
            # handed over at hold time (the usual way: no store access), else from the store
            # (a resend with --id, a reply delivered by another backend, a missed wakeup)
            found = next(iter(gw.take_handed(waiter)), None) or gw.store.take_reply(gid, msg_id, mark=mark)
            if found is not None:
                return message_dict(found)
        if confirm.done() and confirm.exception() is not None:
            raise confirm.exception()  # type: ignore[misc]
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            await_confirm(confirm, started + CONFIRM_TIMEOUT)
            raise Timeout(
                f"no reply to {msg_id} within {timeout:g}s",
                "the reply will be held for you: collect it later with `bridge poll`",
            )
        woken = waiter.event.wait(min(remaining, LOOK_EVERY))
        waiter.event.clear()
        # reset only when seen set, and before the look: a reply committed after that sets it
        # (then the event) again, so no notification is lost; the once-a-second timeout
        # still looks, as before
        if waiter.notified:
            waiter.notified = False
            look = True
        else:
            look = not woken


def op_poll(gw: Gateway, early: EarlyAnswer | None = None, **wire: Any) -> dict[str, Any]:
    """Drain held messages (:class:`~bridgecli.requests.PollRequest`); with ``peek`` return
    them without draining — the caller then confirms with op ``ack`` once it has handed them
    on (no loss if it dies in between). With ``confirm`` they are taken, not drained, until
    the client confirms them (op ``confirm``), and held again if it goes away first. With
    ``peer`` (a gid or label) only that sender's messages are taken; the others stay held.
    ``early``: the first wake-up's messages may be answered from the commit."""
    request = PollRequest.from_wire(wire)
    gid, wait, limit, peek, confirm, peer = (
        request.gid,
        request.wait,
        request.limit,
        request.peek,
        request.confirm,
        request.peer,
    )
    peer_gid = gw.resolve_target(peer, force=True) if peer else None
    registered: dict[str, Any] = {}
    identity = _sender(gw, gid, registered)
    deadline = time.monotonic() + min(float(wait or 0), MAX_WAIT)
    mark = TAKEN if confirm else DRAINED
    # a draining poll takes messages handed over at hold time; a peek only wants the wakeup
    waiter = (
        gw.add_waiter(identity.gid, claims=0 if peek else int(limit), two_phase=confirm, peer=peer_gid)
        if wait
        else None
    )

    def result_of(messages: list[StoredMessage]) -> dict[str, Any]:
        result = {"gid": identity.gid, "messages": [message_dict(m) for m in messages], **registered}
        if peer_gid:
            result["peer"] = peer_gid
        if confirm and not peek and messages:
            result[PENDING] = [m.envelope.msg_id for m in messages]
        return result

    sent: list[dict[str, Any]] = []
    answer = (
        _early_answer(early, lambda handed: result_of(sorted(handed, key=lambda m: m.received)), sent)
        if early is not None and waiter is not None and not peek
        else None
    )

    try:
        while True:
            if peek:
                messages = gw.store.peek(identity.gid, limit=int(limit), sender=peer_gid)
            else:
                handed = gw.take_handed(waiter) if waiter is not None else []
                messages = (
                    gw.store.drain(identity.gid, limit=int(limit) - len(handed), mark=mark, sender=peer_gid)
                    if len(handed) < limit
                    else []
                )
                if handed:
                    messages = sorted(messages + handed, key=lambda m: m.received)
            if messages or waiter is None or time.monotonic() >= deadline:
                return result_of(messages)
            if answer is not None:  # the first wait only: later ones are rare
                if gw.wait_answering(waiter, answer, min(deadline - time.monotonic(), LOOK_EVERY)):
                    return _answered(sent[0])
                answer = None
            else:
                waiter.event.wait(min(deadline - time.monotonic(), LOOK_EVERY))
            waiter.event.clear()
    finally:
        if waiter is not None:
            gw.remove_waiter(waiter)


def op_confirm(gw: Gateway, msg_ids: list[str]) -> dict[str, Any]:
    """The client has the messages a ``confirm`` poll or send handed it (see :data:`PENDING`)."""
    ids = [str(m) for m in msg_ids]
    return {"confirmed": gw.store.confirm(ids), "confirmedIds": ids}


def op_ack(gw: Gateway, msg_ids: list[str], gid: str | None = None) -> dict[str, Any]:
    """Confirm messages returned by ``poll`` with ``peek``: they leave the hold."""
    registered: dict[str, Any] = {}
    identity = _sender(gw, gid, registered)
    return {"gid": identity.gid, "acked": gw.store.ack(identity.gid, list(msg_ids)), **registered}


def op_held(gw: Gateway, gid: str | None = None, wait: float = 0.0, baseline: int | None = None) -> dict[str, Any]:
    """How many messages are held for an entity, without draining them. With ``wait``,
    block until at least one is — or, given ``baseline``, until the count differs from it
    (the MCP server uses this to push notifications without re-polling)."""
    registered: dict[str, Any] = {}
    identity = _sender(gw, gid, registered)
    deadline = time.monotonic() + min(float(wait or 0), MAX_WAIT)
    waiter = gw.add_waiter(identity.gid) if wait else None
    try:
        while True:
            count = gw.store.held_count(identity.gid)
            changed = count != baseline if baseline is not None else count > 0
            if changed or waiter is None or time.monotonic() >= deadline:
                return {"gid": identity.gid, "held": count, "oldest": gw.store.oldest_held(identity.gid), **registered}
            waiter.event.wait(min(deadline - time.monotonic(), LOOK_EVERY))
            waiter.event.clear()
    finally:
        if waiter is not None:
            gw.remove_waiter(waiter)


def op_show(gw: Gateway, msg_id: str) -> dict[str, Any]:
    original = messaging.original_message(gw.store, msg_id)
    stored = gw.store.get(original.msg_id)
    return {"message": message_dict(stored or original)}


def op_roster(gw: Gateway, **wire: Any) -> dict[str, Any]:
    host = RosterRequest.from_wire(wire).host
    view = gw.roster
    if view is None:
        return {"entries": [], "gateways": [], "interval": None}
    return {
        "entries": [e.as_dict() for e in view.entries(host)],
        "gateways": [g.__dict__ for g in view.gateways()],
        "interval": gw.config.values["roster.interval"],
    }


def op_spawn(gw: Gateway, **wire: Any) -> dict[str, Any]:
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
    )
    # the answer can overtake the new entity's first heartbeat: put it in our view now, so
    # `bridge send <new gid>` right after `bridge spawn` is not refused as unannounced
    if gw.roster is not None:
        gw.roster.add_if_absent(roster_mod.spawned_entry(result, interval=gw.config.values["roster.interval"]))
    return result


def op_stop(gw: Gateway, **wire: Any) -> dict[str, Any]:
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


def _requester(gw: Gateway, sender: str | None) -> dict[str, Any]:
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
}

__all__ = ["OPS", "entity_dict", "message_dict", "short"]
