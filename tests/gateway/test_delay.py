"""One delay mechanism, the one users run: TTL tiers behind ``bridge.delay.<host>`` on every broker."""

from __future__ import annotations

import time
import uuid

import pika
import pytest

from bridgecli.errors import ExitCode


def _depth(uri: str, queue: str) -> int:
    connection = pika.BlockingConnection(pika.URLParameters(uri))
    try:
        return connection.channel().queue_declare(queue, passive=True).method.message_count
    finally:
        connection.close()


def test_a_delayed_message_waits_on_the_broker_across_a_gateway_restart(host_factory, rabbitmq):
    a = host_factory("a")
    main = a.register("main", role="main")
    a.start_gateway()
    sent = a.bridge_json("send", main, "remind me", "--from", "main", "--delay", "4s")
    a.stop_gateway()
    # the message is in its tier queue while no gateway runs, not in the inbox or anywhere else
    assert _depth(rabbitmq.uri, f"bridge.delay.{a.name}.4000") >= 1
    a.start_gateway()
    got = []
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = a.bridge_json("poll", "--as", main, "--wait", "5s")["messages"]
    assert [(m["msgId"], m["content"]) for m in got] == [(sent["msgId"], "remind me")]
    assert a.bridge_json("poll", "--as", main, "--wait", "1s")["messages"] == [], "delivered once"


@pytest.fixture
def vhost(rabbitmq):
    """A vhost of its own, so that a test may leave odd objects in it."""
    vhost = f"bt-delay-{uuid.uuid4().hex[:6]}"
    rabbitmq.ctl("add_vhost", vhost)
    rabbitmq.ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    yield rabbitmq.uri.rstrip("/") + "/" + vhost
    rabbitmq.ctl("delete_vhost", vhost, check=False)


def test_another_bridge_delay_is_a_clear_conflict(host_factory, vhost):
    a = host_factory("a", broker_uri=vhost)
    # the host's delay exchange already is a topic exchange, as the delayed-message plugin's
    # leftovers or another tool could leave it
    connection = pika.BlockingConnection(pika.URLParameters(vhost))
    connection.channel().exchange_declare(f"bridge.delay.{a.name}", "topic", durable=True)
    connection.close()
    main = a.register("main", role="main")
    direct = a.bridge("send", main, "later", "--from", "main", "--delay", "1s")
    assert direct.returncode == ExitCode.CONFLICT, direct.stderr
    assert f"exchange bridge.delay.{a.name} already exists" in direct.stderr and "headers exchange" in direct.stderr
    doctor = a.bridge("doctor")
    assert doctor.returncode == ExitCode.CONFLICT and "delay exchange" in doctor.stdout + doctor.stderr
    gateway = a.bridge("gateway", timeout=60)
    assert gateway.returncode == ExitCode.CONFLICT and f"bridge.delay.{a.name}" in gateway.stderr
