"""RabbitAdmin against a real RabbitMQ node with the management plugin (one per module)."""

from __future__ import annotations

import time

import pika
import pika.exceptions
import pytest

from bridgecli.errors import BrokerUnavailable
from bridgecli.hub.rabbitadmin import RabbitAdmin
from bridgecli.nodeprocess import free_port
from bridgecli.rabbitnode import LocalNode


def _connect(node: LocalNode, user: str, password: str) -> pika.BlockingConnection:
    return pika.BlockingConnection(
        pika.ConnectionParameters("127.0.0.1", node.port, "/", pika.PlainCredentials(user, password))
    )


def test_users(admin):
    assert admin.overview()["rabbitmq_version"]
    assert not admin.user_exists("host-a")
    admin.put_user("host-a", "s3cret")
    admin.put_user("host-a", "s3cret2", tags="monitoring")  # replacing is fine
    assert admin.user_exists("host-a")
    assert admin.delete_user("host-a") is True
    assert admin.delete_user("host-a") is False
    assert not admin.user_exists("host-a")


def test_permissions_take_effect(admin, node):
    admin.put_user("host-b", "pw")
    admin.set_permissions("host-b", r"^allowed\.", r"^(allowed\..*|amq\.topic)$", r"^allowed\.")
    admin.set_topic_permissions("host-b", "amq.topic", r"^allowed\.", ".*")
    connection = _connect(node, "host-b", "pw")
    try:
        channel = connection.channel()
        channel.queue_declare("allowed.q", auto_delete=True)
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            channel.queue_declare("denied.q")
        assert refused.value.reply_code == 403

        channel = connection.channel()
        channel.confirm_delivery()
        channel.basic_publish("amq.topic", "allowed.x", b"ok")
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            channel.basic_publish("amq.topic", "denied.x", b"no")
        assert refused.value.reply_code == 403

        admin.clear_topic_permissions("host-b")
        admin.clear_topic_permissions("host-b")  # none left: still fine
        channel = connection.channel()  # a fresh channel: no cached authorisation
        channel.confirm_delivery()
        channel.basic_publish("amq.topic", "denied.x", b"now allowed")
    finally:
        connection.close()
        admin.delete_user("host-b")


def test_list_and_close_connection(admin, node):
    admin.put_user("host-c", "pw")
    admin.set_permissions("host-c", ".*", ".*", ".*")
    connection = _connect(node, "host-c", "pw")
    try:
        assert [c["user"] for c in admin.live_connections("host-c")] == ["host-c"]
        assert admin.live_connections("nobody") == []
        deadline = time.monotonic() + 60  # the statistics database lags ~5 s, more under load
        while not (listed := admin.connections("host-c")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [c["user"] for c in listed] == ["host-c"]
        assert all(c["user"] == "hub-machine" for c in admin.connections("hub-machine"))

        admin.close_connection(listed[0]["name"], "access revoked by the hub")
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                connection.process_data_events(time_limit=0.2)
        assert closed.value.reply_code == 320
        assert "access revoked by the hub" in closed.value.reply_text
        admin.close_connection(listed[0]["name"], "again")  # gone: fine
    finally:
        if connection.is_open:
            connection.close()
        admin.delete_user("host-c")


def test_errors(node):
    user, _ = node.admin_credentials
    with pytest.raises(BrokerUnavailable, match="HTTP 401"):
        RabbitAdmin(node.management_port, user, "wrong").overview()
    with pytest.raises(BrokerUnavailable, match="HTTP 401"):
        RabbitAdmin(node.management_port, user, "wrong").wait_ready(5)
    with pytest.raises(BrokerUnavailable, match="HTTP 401"):  # the secured node has no guest
        RabbitAdmin(node.management_port, "guest", "guest").overview()
    closed_port = free_port()
    with pytest.raises(BrokerUnavailable, match=f"127.0.0.1:{closed_port}"):
        RabbitAdmin(closed_port, *node.admin_credentials).wait_ready(1)
