"""Dead letters made the way a gateway makes them, for the dashboard tests."""

from __future__ import annotations

import json
import uuid

import pika


def dead_letter(uri: str, recipient: str, sender: str, content: str, detail: str) -> str:
    """Put one message in bridge.dlq the way a gateway does: through bridge.dlx with the
    reason headers and the recipient as routing key."""
    msg_id = str(uuid.uuid4())
    body = json.dumps(
        {
            "v": 1,
            "msgId": msg_id,
            "kind": "SEND",
            "from": sender,
            "to": recipient,
            "ts": 1.0,
            "content": content,
            "fromLabel": "ghost",
        }
    ).encode()
    connection = pika.BlockingConnection(pika.URLParameters(uri))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        channel.basic_publish(
            "bridge.dlx",
            recipient,
            body,
            pika.BasicProperties(
                message_id=msg_id,
                delivery_mode=2,
                headers={"x-bridge-reason": "delivery-failed", "x-bridge-detail": detail},
            ),
        )
    finally:
        connection.close()
    return msg_id
