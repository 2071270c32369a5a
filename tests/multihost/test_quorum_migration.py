"""Switching an existing installation to ``messaging.inbox_queue_type = "quorum"``.

On a cluster, ``bridge.dlq`` and ``control.<host>`` are quorum queues (a classic queue lives
on one node, and while that node is down every gateway's declare fails with 404 "home node
is down"). RabbitMQ cannot change a queue's type in place: a gateway that finds the old
classic queue stops with a clear conflict (exit 13) naming the queue and the fix, and
starts once the queue has been deleted — it then declares the quorum one. This is the
migration docs/deploy.md describes (a RabbitMQ cluster), run step by step on a private node.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

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
