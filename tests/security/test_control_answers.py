"""Only the target host answers its control requests: a spawn answer from anyone else, or
with no ``user_id``, is ignored by the requester (real RabbitMQ, real broker users)."""

from __future__ import annotations

import json
import threading
import uuid

import pika

from bridgecli import config, control_client
from bridgecli.amqp import topology


def _publish_answer(uri: str, key: str, correlation: str, body: dict, user_id: str | None) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(uri))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        props = pika.BasicProperties(correlation_id=correlation, content_type="application/json", user_id=user_id)
        channel.basic_publish(topology.CONTROL, key, json.dumps(body).encode(), props)
    finally:
        connection.close()


def test_a_spawn_answer_counts_only_from_the_target_hosts_user(rabbitmq):
    target, password = f"t{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    rabbitmq.ctl("add_user", target, password)
    rabbitmq.ctl("set_permissions", "-p", "/", target, ".*", ".*", ".*")
    target_uri = rabbitmq.uri.replace("guest:guest@", f"{target}:{password}@")
    setup = pika.BlockingConnection(pika.URLParameters(rabbitmq.uri))
    channel = setup.channel()
    topology.declare(channel, *topology.SHARED_EXCHANGES, topology.control_queue(target))
    setup.close()

    def target_gateway() -> None:
        """Take the request; a forger answers first (as guest, then with no user_id at all),
        then the target itself."""
        connection = pika.BlockingConnection(pika.URLParameters(target_uri))
        try:
            ch = connection.channel()
            for method, props, _body in ch.consume(f"control.{target}", inactivity_timeout=30):
                assert method is not None, "no request came"
                ch.basic_ack(method.delivery_tag)
                key, correlation = props.reply_to, props.correlation_id
                _publish_answer(rabbitmq.uri, key, correlation, {"ok": True, "gid": "forged-as-guest"}, "guest")
                _publish_answer(rabbitmq.uri, key, correlation, {"ok": True, "gid": "forged-anonymous"}, None)
                _publish_answer(target_uri, key, correlation, {"ok": True, "gid": "genuine"}, target)
                break
        finally:
            connection.close()

    worker = threading.Thread(target=target_gateway, daemon=True)
    worker.start()
    requester = config.load(
        {"broker.uri": rabbitmq.uri, "host.id": f"req{uuid.uuid4().hex[:6]}", "security.sender_check": "host"}
    )
    answer = control_client.request(requester, target, {"type": "spawn", "profile": "p"}, timeout=30)
    worker.join(30)
    assert answer["gid"] == "genuine"
    rabbitmq.ctl("delete_user", target, check=False)
