"""``bridge join --node INVITE``: make this machine another RabbitMQ node of a cluster hub.

Reaches the hub as a host's join does (the invite's CA pinned, the secret traded on that
TLS connection), writes the cluster's cookie and this node's certificates privately, starts
a :class:`ClusterNode` with the hub's AMQPS listener settings, joins the hub's node and
grows the quorum queues onto it. Later hosts learn this node's address and fail over to
it; the node's own registrar (:mod:`bridgecli.hub.node_registrar`) answers when the hub's
cannot.
``bridge broker start`` on such a machine starts the same node again (:func:`start_saved`).
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from bridgecli import localbroker, paths
from bridgecli.errors import ClusterPeerUnreachable, Conflict, InviteError
from bridgecli.hub import cluster, lifecycle, node_registrar
from bridgecli.hub import invite as invite_mod
from bridgecli.hub.join import enrol, reach
from bridgecli.node_dist import ClusterNode


def _write_files(answer: dict[str, Any]) -> None:
    """The answer's secrets and this node's record, 0600 in a 0700 directory."""
    directory = paths.ensure_private_dir(cluster.node_dir())
    for name, key in (
        ("ca.pem", "ca"),
        ("node.pem", "nodeCert"),
        ("node.key", "nodeKey"),
        ("amqps.pem", "amqpsCert"),
        ("amqps.key", "amqpsKey"),
        ("cookie", "cookie"),
    ):
        cluster.write_private(directory / name, str(answer[key]).encode())
    record = {k: answer[k] for k in ("hub", "name", "address", "nodename", "nodes")}
    record["amqps_port"] = int(answer["amqpsPort"])
    cluster.write_private(directory / "node.json", json.dumps(record, indent=2).encode())
    if "registrar" in answer:  # a hub of an earlier version sends no registrar part
        node_registrar.save(answer)


def join_node(text: str, timeout: float = 120.0) -> dict[str, Any]:
    """The whole node join; returns what the CLI prints (name, nodename, peer, seconds).
    ClusterPeerUnreachable (the new node stopped again) when the hub's node does not answer."""
    began = time.monotonic()
    invite = invite_mod.decode(text)
    if invite.kind != "node":
        raise InviteError("this is an invite for a host, not a cluster node", "join it with `bridge join INVITE`")
    running = localbroker.read_state()
    if running is not None:
        raise Conflict(
            f"a RabbitMQ node already runs on this machine ({running.nodename})",
            "a cluster node needs the machine's embedded broker: stop it first (`bridge broker stop`)",
        )
    host, port, context = reach(invite)
    answer = enrol(host, port, context, invite, secrets.token_urlsafe(32), op="enrol-node")
    _write_files(answer)
    record = cluster.read_node_record()
    assert record is not None
    node = saved_node(record)
    node.start(timeout)
    localbroker.record(node)
    peer = str(record["nodes"][0]["nodename"])
    try:
        joined_in = node.join_cluster(peer, timeout=timeout)
    except ClusterPeerUnreachable:
        localbroker.stop()
        raise
    grown = time.monotonic()
    added, tried = node.grow_quorum_queues()
    mode = cluster.settle_partitions(node)
    node_registrar.start(timeout)
    return {
        "hub": record["hub"],
        "name": record["name"],
        "nodename": record["nodename"],
        "address": f"{record['address']}:{record['amqps_port']}",
        "joined": peer,
        "join_seconds": round(joined_in, 2),
        "queues_grown": added,
        "queues_not_grown": tried - added,
        "grow_seconds": round(time.monotonic() - grown, 2),
        "partition_handling": mode,
        "seconds": round(time.monotonic() - began, 2),
    }


def saved_node(record: dict[str, Any]) -> ClusterNode:
    """This machine's cluster node as ``join --node`` recorded it: its name, TLS
    distribution and the hub's AMQPS listener, so that every start brings back the same node."""
    directory = cluster.node_dir()
    listen = [(record["address"], int(record["amqps_port"]))]
    return ClusterNode(
        localbroker.broker_dir(),
        cluster.node_dist(record),
        cookie=(directory / "cookie").read_text().strip(),
        management=True,  # for this machine's registrar, on loopback
        extra_conf=lifecycle.tls_listener_conf(
            listen, directory / "ca.pem", directory / "amqps.pem", directory / "amqps.key"
        ),
    )


def start_saved(timeout: float = 90.0) -> localbroker.StartResult | None:
    """Start this node machine's cluster node with its saved settings (it rejoins its
    cluster by itself: its database names the other members), set the cluster's partition
    handling again (a restart forgets it) and start its registrar; None on any other machine."""
    record = cluster.read_node_record()
    if record is None:
        return None
    node = saved_node(record)
    result = localbroker.start_node(node, timeout)
    cluster.settle_partitions(node)
    node_registrar.start(timeout)
    return result
