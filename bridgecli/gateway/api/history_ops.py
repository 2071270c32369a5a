"""The history operations of the local API: ``history`` (archived messages, filtered and
searched) and ``thread`` (one conversation). Why apart from :mod:`.operations`: they read the
gateway's message archive and nothing of its messaging (docs/history.md).
"""

from __future__ import annotations

from typing import Any

from bridgecli.envelope import is_uuid
from bridgecli.errors import ConfigError, NotFound
from bridgecli.gateway.api.contract import ApiGateway
from bridgecli.hoststate.archive import Archive
from bridgecli.requests import HistoryRequest, ThreadRequest


def op_history(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    """Archived messages, newest first (:class:`~bridgecli.requests.HistoryRequest`)."""
    request = HistoryRequest.from_wire(wire)
    archive = _archive(gw)
    owner = gw.registry.resolve(request.as_gid).gid if request.as_gid else None
    peer = _peer(gw, archive, request.with_) if request.with_ else None
    messages = archive.history(
        owner=owner,
        peer=peer,
        channel=request.channel,
        search=request.search,
        since=request.since,
        limit=request.limit,
    )
    return {"messages": with_receipts(gw, messages)}


def op_thread(gw: ApiGateway, **wire: Any) -> dict[str, Any]:
    """The conversation an archived message belongs to, in time order
    (:class:`~bridgecli.requests.ThreadRequest`)."""
    request = ThreadRequest.from_wire(wire)
    archive = _archive(gw)
    try:
        messages = archive.thread(request.msg_id)
    except LookupError as exc:
        from bridgecli.errors import Ambiguous

        raise Ambiguous(str(exc), "give more of the message id") from None
    if not messages:
        raise NotFound(
            f"no message {request.msg_id} is archived on this host",
            "see `bridge history`; messages are kept for history.keep seconds",
        )
    return {"messages": with_receipts(gw, messages)}


def with_receipts(gw: ApiGateway, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each sent one's receipts (``states``, as ``bridge track`` shows
    them) while the ledger still has its record: what became of it, beside what was said."""
    ledger = gw.tracking.ledger
    if ledger is None:
        return messages
    gw.tracking.settle()
    sent = [m for m in messages if m.get("direction") == "sent" and not m.get("channel")]
    records = ledger.get_many(str(m["msgId"]) for m in sent)
    for message in sent:
        record = records.get(str(message["msgId"]))
        if record is not None:
            message["states"] = record["states"]
    return messages


def _archive(gw: ApiGateway) -> Archive:
    """The archive, once what was queued before this request is written."""
    history = gw.history
    if history.archive is None:
        raise ConfigError("history is off on this host", "turn it on: bridge config set history.enabled true")
    history.settle()
    return history.archive


def _peer(gw: ApiGateway, archive: Archive, target: str) -> str:
    """The gid ``target`` names: a gid as given, a label through the gateway (local entities,
    then the roster), else a sender archived under that label (a peer gone from the roster)."""
    if is_uuid(target.lower()):
        return target.lower()
    try:
        return gw.resolve_target(target, force=True)
    except NotFound:
        found = archive.gids_labelled(target)
        if len(found) == 1:
            return found[0]
        raise
