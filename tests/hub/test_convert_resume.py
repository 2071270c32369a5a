"""A conversion into a cluster node that was killed half-way is finished by the next run.

A real node holds messages; RabbitMQ's rename tool has run and one file has moved, but the
database has not (the state a ``hub start --cluster`` killed at that point leaves). The next
:func:`convert.rename` goes back to the tool's copy of the original database, renames again,
and the node boots as ``bridge@ADDRESS`` with every message.
"""

from __future__ import annotations

import subprocess

import pika

from bridgecli import localbroker
from bridgecli.hub import convert
from bridgecli.hub.pki import HubPki
from bridgecli.node_dist import ClusterNode, DistTls
from bridgecli.rabbitnode import LocalNode, rabbitmq_bin_dir

ADDRESS = "127.0.0.61"
QUEUE = "agent.keeper.inbox"


def _publish(uri: str, count: int) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(uri))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        channel.queue_declare(QUEUE, durable=True)
        for i in range(count):
            channel.basic_publish("", QUEUE, f"m{i}".encode(), pika.BasicProperties(delivery_mode=2))
    finally:
        connection.close()


def test_a_conversion_killed_after_the_rename_tool_is_redone(bridge_home):
    base = localbroker.broker_dir()
    old = LocalNode(base, host_user="hub")
    old.start()
    try:
        _publish(old.uri, 3)
    finally:
        old.stop()
    plan = convert.begin(old.nodename, ADDRESS)
    mnesia = base / "mnesia"
    subprocess.run(
        [str(rabbitmq_bin_dir() / "rabbitmqctl"), "-n", old.nodename, "rename_cluster_node", old.nodename, plan.new],
        env=old.env(),
        cwd=base,
        capture_output=True,
        check=True,
    )
    (mnesia / f"{old.nodename}-feature_flags").rename(mnesia / f"{plan.new}-feature_flags")
    assert (mnesia / f"{old.nodename}-rename" / "pending.config").exists()

    assert convert.rename(plan)
    assert not (mnesia / old.nodename).exists() and (mnesia / f"{plan.new}-feature_flags").exists()
    assert convert.rename(plan) == []  # done: running it again changes nothing

    pki = HubPki(bridge_home.root / "pki")
    pki.ensure_ca("hub")
    key, cert = pki.issue_node_cert(f"node-{ADDRESS}", [ADDRESS])
    for name, data in (("node.key", key), ("node.pem", cert)):
        (bridge_home.root / name).write_bytes(data)
        (bridge_home.root / name).chmod(0o600)
    dist = DistTls(ADDRESS, bridge_home.root / "node.pem", bridge_home.root / "node.key", pki.ca_cert)
    node = ClusterNode(base, dist, cookie="C" * 40, host_user="hub")
    node.start()
    try:
        connection = pika.BlockingConnection(pika.URLParameters(node.uri))  # the same user and password
        try:
            assert connection.channel().queue_declare(QUEUE, passive=True).method.message_count == 3
        finally:
            connection.close()
        assert not (mnesia / f"{plan.new}-rename").exists()  # the node finished the rename at boot
    finally:
        node.stop()
