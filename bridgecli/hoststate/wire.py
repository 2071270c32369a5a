"""Entities and received messages as the JSON the local API answers and ``--json`` prints.

One form for both the gateway and the CLI's direct path, so a script reading ``--json``
cannot tell which path served it.
"""

from __future__ import annotations

from typing import Any


def entity_dict(entity: Any) -> dict[str, Any]:
    """An :class:`~bridgecli.interfaces.Entity` as its wire object."""
    data = {
        "gid": entity.gid,
        "label": entity.label,
        "role": entity.role,
        "deliver": entity.deliver,
        "host": entity.host,
        "created": entity.created,
    }
    if entity.launcher:
        data["launcher"] = entity.launcher
    return data


def message_dict(stored_or_envelope: Any) -> dict[str, Any]:
    """A stored message (with its hold state) or a bare envelope as its wire object."""
    envelope = getattr(stored_or_envelope, "envelope", stored_or_envelope)
    data = {
        "msgId": envelope.msg_id,
        "kind": envelope.kind,
        "from": envelope.sender,
        "fromLabel": envelope.sender_label,
        "fromHost": envelope.sender_host,
        "to": envelope.recipient,
        "inReplyTo": envelope.in_reply_to,
        "turn": envelope.turn,
        "ts": envelope.ts,
        "content": envelope.content,
    }
    if envelope.channel is not None:
        data["channel"] = envelope.channel
        if envelope.copy_of is not None:
            data["copyOf"] = envelope.copy_of
    if envelope.user_id:
        data["user"] = envelope.user_id
    state = getattr(stored_or_envelope, "state", None)
    if state:
        data["state"] = state
    if getattr(stored_or_envelope, "redelivered", False):
        data["redelivered"] = True  # a reader that may have seen it drops it by msgId
    return data
