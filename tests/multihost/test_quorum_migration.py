"""Switching an existing installation to ``messaging.inbox_queue_type = "quorum"``.

On a cluster, ``bridge.dlq`` and ``control.<host>`` are quorum queues (a classic queue lives
on one node, and while that node is down every gateway's declare fails with 404 "home node
is down"). RabbitMQ cannot change a queue's type in place: a gateway that finds the old
classic queue stops with a clear conflict (exit 13) naming the queue and the fix, and
starts once the queue has been deleted — it then declares the quorum one. ``bridge broker
migrate-queues`` rebuilds them with every message
(docs/deploy.md#5-when-one-broker-node-is-not-enough-a-rabbitmq-cluster); deleting them by
hand is the fallback that loses what they hold. Both run here on a private node.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pika

from bridgecli.amqp import topology
from bridgecli.envelope import Envelope
from bridgecli.errors import ExitCode
from tests.support.env import BRIDGE_BIN
from tests.support.hosts import Host, close_checked


def _queue_types(broker) -> dict[str, str]:
    out = broker.ctl("list_queues", "name", "type", "-q", "--no-table-headers").stdout
    return {parts[0]: parts[1] for parts in (line.split() for line in out.splitlines()) if len(parts) == 2}


def _gateway_refuses(host: Host) -> str:
    """Run ``bridge gateway`` and expect it to stop by itself with a conflict; its output."""
    proc = subprocess.run(
        [BRIDGE_BIN, "gateway"], env=host.env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == ExitCode.CONFLICT, (proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout + proc.stderr


def test_classic_dlq_and_control_queue_must_be_deleted_when_switching_to_quorum(rabbitmq_node_factory, tmp_path: Path):
    broker = rabbitmq_node_factory()
    name = f"mig{uuid.uuid4().hex[:6]}"
    classic = Host(name, tmp_path / "classic", broker.uri)
    try:
        classic.start_gateway()  # the old installation: classic bridge.dlq and control.<host>
    finally:
        close_checked([classic])
    types = _queue_types(broker)
    assert types["bridge.dlq"] == "classic" and types[f"control.{name}"] == "classic", types

    quorum = Host(name, tmp_path / "quorum", broker.uri, {"BRIDGE_MESSAGING_INBOX_QUEUE_TYPE": "quorum"})
    out = _gateway_refuses(quorum)
    assert "queue bridge.dlq" in out and "rabbitmqctl delete_queue" in out, out
    broker.ctl("delete_queue", "bridge.dlq")
    out = _gateway_refuses(quorum)
    assert f"queue control.{name}" in out, out
    broker.ctl("delete_queue", f"control.{name}")
    try:
        quorum.start_gateway()
    finally:
        close_checked([quorum])
    types = _queue_types(broker)
    assert types["bridge.dlq"] == "quorum" and types[f"control.{name}"] == "quorum", types


def _publish_while_stopped(uri: str, gid: str, count: int) -> list[str]:
    """``count`` messages to ``gid``'s inbox, published as another host would; their ids."""
    connection = pika.BlockingConnection(pika.URLParameters(uri))
    channel = connection.channel()
    channel.confirm_delivery()
    ids = []
    for i in range(count):
        envelope = Envelope(kind="SEND", sender=str(uuid.uuid4()), recipient=gid, content=f"message {i}")
        props = pika.BasicProperties(**envelope.amqp_properties())
        channel.basic_publish(topology.MSG, gid, envelope.to_bytes(), props, mandatory=True)
        ids.append(envelope.msg_id)
    connection.close()
    return ids


def test_migrate_queues_moves_a_stopped_gateways_messages_to_quorum(rabbitmq_node_factory, tmp_path: Path):
    broker = rabbitmq_node_factory()
    name = f"mig{uuid.uuid4().hex[:6]}"
    host = Host(name, tmp_path / "host", broker.uri)
    gid = host.register("keeper")
    try:
        host.start_gateway()  # the old installation: every queue classic
        refused = host.bridge("broker", "migrate-queues")
        assert refused.returncode == ExitCode.CONFLICT, (refused.stdout, refused.stderr)
        assert f"control.{name}" in refused.stderr and "bridge gateway stop" in refused.stderr, refused.stderr
        host.stop_gateway()
        ids = _publish_while_stopped(broker.uri, gid, 30)
        assert _queue_types(broker)[topology.inbox_name(gid)] == "classic"

        done = host.bridge("broker", "migrate-queues", "--json", check=True)
        rows = {row["queue"]: row for row in json.loads(done.stdout)["queues"]}
        assert rows[topology.inbox_name(gid)]["moved"] == 30, rows
        assert {"bridge.dlq", f"control.{name}"} <= set(rows), rows
        types = _queue_types(broker)
        assert types["bridge.dlq"] == types[f"control.{name}"] == types[topology.inbox_name(gid)] == "quorum"

        host.bridge("config", "set", "messaging.inbox_queue_type", "quorum", check=True)
        host.start_gateway()
        got: list[dict] = []
        deadline = time.monotonic() + 60
        while len(got) < len(ids) and time.monotonic() < deadline:
            got += host.bridge_json("poll", "--as", gid, "--wait", "2s", "--limit", "1000")["messages"]
        assert [m["msgId"] for m in got] == ids  # each exactly once, in order
    finally:
        close_checked([host])
