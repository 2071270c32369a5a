"""The receipt operations of the local API: ``track`` (what became of a message sent from
here), ``seen``/``activity`` (what an agent's hook reports) and ``receipts`` (the newest
records, for the dashboard). Why apart from :mod:`.operations`: they read the gateway's
receipt ledger and nothing of its messaging.
"""

from __future__ import annotations

from typing import Any

from bridgecli import receipts as rc
from bridgecli.errors import ConfigError, NotFound
from bridgecli.gateway.api.contract import ApiGateway
from bridgecli.interfaces import Entity
from bridgecli.requests import ActivityRequest, TrackRequest


def op_track(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    """The record of a message sent from this host (:class:`~bridgecli.requests.TrackRequest`),
    once it reached the awaited state, was dead-lettered, or the timeout passed."""
    request = TrackRequest.from_wire(wire)
    ledger = gw.tracking.ledger
    if ledger is None:
        raise ConfigError("receipts are off on this host", "turn them on: bridge config set receipts.enabled true")
    gw.tracking.settle()  # what was queued before this request is in the ledger
    try:
        record = ledger.get(request.msg_id)
        if record is not None and request.wait:
            record = ledger.wait_for(record["msgId"], (request.wait, rc.DEAD), request.within)
    except LookupError as exc:
        from bridgecli.errors import Ambiguous

        raise Ambiguous(str(exc), "give more of the message id") from None
    if record is None:
        raise NotFound(
            f"no message {request.msg_id} was sent from this host",
            "track the msgId `bridge send` printed here; records are kept for receipts.keep seconds",
        )
    return record


def op_activity(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    """What an agent's hook reports (:class:`~bridgecli.requests.ActivityRequest`): the frames
    its prompt carried are ``read`` (receipts go to their senders), and its ``status`` is what
    the roster shows for it. Answers which messages it marked read and the status shown."""
    request = ActivityRequest.from_wire(wire)
    entity = _entity_of(gw, request.gid, request.pane)
    answer: dict[str, Any] = {"gid": entity.gid, "read": []}
    if request.markers:
        found = []
        for marker in dict.fromkeys(request.markers):
            for stored in gw.store.find_prefix(marker):
                envelope = stored.envelope
                if envelope.recipient == entity.gid and stored.state != "delivering":
                    found.append((envelope.msg_id, envelope.recipient, envelope.sender_host))
        gw.tracking.read(found, request.how)
        answer["read"] = [msg_id for msg_id, _, _ in found]
    if request.status:
        answer["status"] = gw.tracking.report_activity(entity.gid, request.status)
    return answer


def op_receipts(gw: ApiGateway, limit: int = 100) -> dict[str, Any]:
    """The newest records of messages sent from here (at most ``limit``, newest first)."""
    ledger = gw.tracking.ledger
    if ledger is None:
        return {"records": [], "enabled": False}
    gw.tracking.settle()
    return {"records": ledger.recent(max(1, min(int(limit), 1000))), "enabled": True}


def _entity_of(gw: ApiGateway, gid: str | None, pane: str | None) -> Entity:
    """The local entity a hook speaks for: ``gid`` (``$BRIDGE_GID``), else the one whose tmux
    address is ``pane`` (``$TMUX_PANE``)."""
    if gid:
        entity = gw.registry.get(gid)
        if entity is not None:
            return entity
    if pane:
        for entity in gw.registry.all():
            if entity.backend == "tmux" and entity.address == pane:
                return entity
    raise NotFound(
        "no entity on this host matches the hook's $BRIDGE_GID or $TMUX_PANE",
        "register the pane: bridge register --deliver tmux:$TMUX_PANE",
    )
