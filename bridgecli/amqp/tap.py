"""Tapping ``bridge.msg``: a transient, exclusive queue bound with ``#`` that sees a copy of
every message routed through the exchange and never takes one from an inbox.

Shared by ``bridge tap`` and ``bridge dashboard`` so both read traffic the same way.
"""

from __future__ import annotations

import uuid
from typing import Any

from bridgecli.amqp import topology


def bind(channel: Any, exchange: str = topology.MSG, routing_key: str = "#", prefix: str = "bridge.tap") -> str:
    """Declare a client-named exclusive, auto-delete queue bound to ``exchange`` and return its
    name (client-named: some brokers refuse server-named queues). The shared exchanges are
    declared first, so a tap works on a broker no gateway has set up yet."""
    topology.declare(channel, *topology.SHARED_EXCHANGES)
    name = f"{prefix}.{uuid.uuid4()}"
    channel.queue_declare(name, exclusive=True, auto_delete=True)
    channel.queue_bind(name, exchange, routing_key=routing_key)
    return name


def row(routing_key: str, body: bytes) -> dict[str, Any]:
    """One tapped message as a dict: the envelope's fields, or ``invalid`` (the reason), the
    routing key and the first 200 bytes of the body when it is not a valid envelope."""
    from bridgecli.envelope import InvalidEnvelope, parse

    try:
        env = parse(body)
    except InvalidEnvelope as exc:
        return {"invalid": exc.reason, "routing_key": routing_key, "body": body[:200].decode("utf-8", errors="replace")}
    return {
        "msgId": env.msg_id,
        "kind": env.kind,
        "from": env.sender,
        "fromLabel": env.sender_label,
        "fromHost": env.sender_host,
        "to": env.recipient,
        "inReplyTo": env.in_reply_to,
        "ts": env.ts,
        "content": env.content,
        "channel": env.channel,
    }
