"""Dead letters and receipts made the way a gateway makes them, for the dashboard tests."""

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


def receipt(uri: str, sender_host: str, recipient_host: str, msg_id: str, recipient: str, **fields) -> None:
    """Tell ``sender_host`` what became of ``msg_id`` as ``recipient_host``'s gateway would:
    one RECEIPT frame on bridge.ctl under the sender host's key (``fields``: state, how,
    reason — whatever that host chooses to say)."""
    import time

    from bridgecli import receipts

    item = receipts.Receipt(msg_id=msg_id, recipient=recipient, at=time.time(), **fields)
    connection = pika.BlockingConnection(pika.URLParameters(uri))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        channel.basic_publish(
            "bridge.ctl",
            sender_host,
            receipts.encode(recipient_host, [item]),
            pika.BasicProperties(type=receipts.FRAME_TYPE, content_type="application/json", delivery_mode=2),
        )
    finally:
        connection.close()
