"""Receipts: what the recipient's host tells the sender's host about a message (pure data).

A message's life, as its sender's host records it (docs/receipts.md): ``sent`` (the broker
confirmed it), ``delivered`` (how: ``typed``, ``held``, ``exec``, ``accepted``), ``read``
(how: ``poll``, ``wait``, ``hook:CLIENT``, ``turn``) and ``dead-lettered`` (with the reason).
Receipts travel as ``RECEIPT`` frames to ``control.<sender host>``, several per frame; this
module is their codec and the checks every item passes. No broker imports: the gateway, the
CLI and the tests share it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bridgecli import wirejson
from bridgecli.envelope import is_uuid

SENT, DELIVERED, READ, DEAD = "sent", "delivered", "read", "dead-lettered"
STATES = (SENT, DELIVERED, READ, DEAD)
#: the states a receipt from another host may report (``sent`` is the sender's own)
REPORTED = (DELIVERED, READ, DEAD)
#: what ``bridge track --wait`` may wait for, in the order a message reaches them
AWAITABLE = (DELIVERED, READ)
#: the AMQP ``type`` of a receipt frame on ``bridge.ctl``
FRAME_TYPE = "RECEIPT"
VERSION = 1
#: ceilings for hostile frames: a frame is refused whole beyond them
MAX_FRAME_BYTES = 256 * 1024
MAX_ITEMS = 512
#: longest ``how``, ``ref`` and ``reason`` kept (longer text is cut, not refused)
MAX_HOW, MAX_REF, MAX_REASON = 40, 200, 500


class BadReceipt(ValueError):
    """A receipt frame or item that is not well formed (dropped and counted, never trusted)."""


@dataclass(frozen=True)
class Receipt:
    """One state of one message: ``msg_id`` sent to ``recipient`` reached ``state`` at ``at``,
    by ``how`` (with the client's own id ``ref``), or was dead-lettered for ``reason``."""

    msg_id: str
    recipient: str
    state: str
    at: float
    how: str | None = None
    ref: str | None = None
    reason: str | None = None

    def to_wire(self) -> dict[str, Any]:
        item: dict[str, Any] = {"msgId": self.msg_id, "to": self.recipient, "state": self.state, "at": self.at}
        for key in ("how", "ref", "reason"):
            value = getattr(self, key)
            if value is not None:
                item[key] = value
        return item


def encode(host: str, receipts: list[Receipt]) -> bytes:
    """The body of one receipt frame published by ``host``."""
    return wirejson.dumps_compact({"v": VERSION, "host": host, "receipts": [r.to_wire() for r in receipts]}).encode()


def decode(body: bytes) -> tuple[str, list[Receipt | BadReceipt]]:
    """The publishing host a frame claims and its items; an item that is not well formed comes
    back as its :class:`BadReceipt` (the others still count). Raises :class:`BadReceipt` for
    a frame that is not one at all."""
    if len(body) > MAX_FRAME_BYTES:
        raise BadReceipt(f"frame is {len(body)} bytes, the ceiling is {MAX_FRAME_BYTES}")
    try:
        data = wirejson.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadReceipt(f"not JSON: {str(exc)[:100]}") from None
    if not isinstance(data, dict) or data.get("v") != VERSION:
        raise BadReceipt("not a version 1 receipt frame")
    host, items = data.get("host"), data.get("receipts")
    if not isinstance(host, str) or not host or len(host) > 63 or not isinstance(items, list):
        raise BadReceipt("a frame needs a host and a list of receipts")
    if len(items) > MAX_ITEMS:
        raise BadReceipt(f"{len(items)} receipts in one frame, the ceiling is {MAX_ITEMS}")
    out: list[Receipt | BadReceipt] = []
    for item in items:
        try:
            out.append(from_wire(item))
        except BadReceipt as exc:
            out.append(exc)
    return host, out


def from_wire(item: Any) -> Receipt:
    """One receipt item, checked: ids are UUIDs, the state is one a host may report, the time
    a finite number; text fields are cut to their ceilings."""
    if not isinstance(item, dict):
        raise BadReceipt("a receipt is not an object")
    msg_id, recipient, state, at = item.get("msgId"), item.get("to"), item.get("state"), item.get("at")
    if not (isinstance(msg_id, str) and is_uuid(msg_id) and isinstance(recipient, str) and is_uuid(recipient)):
        raise BadReceipt("msgId and to must be UUIDs")
    if state not in REPORTED:
        raise BadReceipt(f"state {str(state)[:20]!r} is not one of {', '.join(REPORTED)}")
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
        raise BadReceipt("at must be a finite number")
    return Receipt(
        msg_id=msg_id.lower(),
        recipient=recipient.lower(),
        state=state,
        at=float(at),
        how=_text(item.get("how"), MAX_HOW),
        ref=_text(item.get("ref"), MAX_REF),
        reason=_text(item.get("reason"), MAX_REASON),
    )


def _text(value: Any, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadReceipt("how, ref and reason must be strings")
    return "".join(ch if ch.isprintable() else " " for ch in value[:limit])
