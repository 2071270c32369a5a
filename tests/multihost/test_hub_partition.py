"""A node machine of a three-node cluster hub is cut off its peers, then the network heals.

``hub`` runs ``bridge hub start --cluster``; hostA and hostC join it as nodes, hostB as a
host. hostA's link goes down for longer than the nodes take to declare each other down,
then comes back. The cluster must be whole again by itself: no partition in any node's
``rabbitmqctl cluster_status``, every node running in ``bridge hub nodes``; messages between
the hub's host and hostB still flow, and hostD can still join. The nodes' ``net_ticktime``
is lowered at runtime for this test only, so that detection takes seconds, not a minute.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridgecli.hub.pki import HubPki
from bridgecli.node_dist import ClusterNode, DistTls
from tests.multihost.helpers import poll, register, wait_announced, wait_for
from tests.multihost.hub_lab import broker_uri, cluster_hub
from tests.support.netns import NetnsLab

pytestmark = [pytest.mark.netns, pytest.mark.slow]

NODES = ("hostA", "hostC")  # the machines that become cluster nodes
CUT = "hostA"  # the node machine the partition cuts off
HOST = "hostB"  # a host joined before the partition
NEW = "hostD"  # a host that joins after it
#: seconds of net_ticktime during the partition (RabbitMQ's 60 s would make it last minutes)
TICK = 10


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[NetnsLab, list[dict[str, Any]]]]:
    """The cluster hub with its gateway, both node machines joined (with what each join
    printed), hostB joined with its gateway; stops every node and gateway at the end."""
    with cluster_hub("bhp", (*NODES, HOST, NEW)) as lab:
        joins = []
        for name in NODES:
            line = lab.bridge("hub", "hub", "invite", "--node", name.lower(), "--address", lab.addr(name))
            joins.append(lab.bridge_json(name, "join", "--node", line.stdout.strip(), timeout=240))
        lab.bridge(HOST, "join", lab.bridge("hub", "hub", "invite", HOST.lower()).stdout.strip())
        lab.start_gateway(HOST)
        yield lab, joins


def _node(lab: NetnsLab, machine: str) -> ClusterNode:
    """``machine``'s cluster node, built from the files bridge wrote there (to ask, not start)."""
    home = lab.host(machine).home
    base = home.data_dir / "broker"
    if machine == "hub":
        files = home.data_dir / "hub" / "cluster"
        dist = DistTls(
            lab.addr("broker"), files / "node.pem", files / "node.key", HubPki(home.data_dir / "hub" / "pki").ca_cert
        )
    else:
        files = Path(home.env["XDG_STATE_HOME"]) / "bridge" / "node"
        dist = DistTls(lab.addr(machine), files / "node.pem", files / "node.key", files / "ca.pem")
    return ClusterNode(base, dist)


def _eval(lab: NetnsLab, machine: str, code: str) -> str:
    """``rabbitmqctl eval CODE`` on ``machine``'s node, from inside its namespace."""
    node = _node(lab, machine)
    ns = "broker" if machine == "hub" else machine
    return lab.in_ns(ns, lambda: node.ctl("eval", code, timeout=90).stdout.strip())


def _status(lab: NetnsLab, machine: str) -> dict[str, Any] | None:
    """``machine``'s ``cluster_status`` as JSON (None while its node does not answer)."""
    node = _node(lab, machine)
    ns = "broker" if machine == "hub" else machine
    result = lab.in_ns(ns, lambda: node.ctl("cluster_status", "--formatter", "json", check=False, timeout=90))
    try:
        return dict(json.loads(result.stdout))
    except ValueError:
        return None


def _views(lab: NetnsLab) -> dict[str, tuple[list[str], Any]]:
    """Every node's (running nodes, partitions) as its own ``cluster_status`` says."""
    views = {}
    for machine in ("hub", *NODES):
        status = _status(lab, machine)
        views[machine] = (sorted(status["running_nodes"]), status["partitions"]) if status else ([], "no answer")
    return views


def _whole(views: dict[str, tuple[list[str], Any]]) -> bool:
    return all(len(running) == 3 and not partitions for running, partitions in views.values())


def test_a_node_cut_off_longer_than_detection_rejoins_by_itself(cluster: tuple[NetnsLab, list[dict[str, Any]]]):
    lab, joins = cluster
    main = register(lab, "hub", "hp-main", role="main")
    worker = register(lab, HOST, "hp-worker")
    wait_announced(lab, "hub", worker)
    wait_announced(lab, HOST, main)
    handling = {m: _eval(lab, m, "application:get_env(rabbit, cluster_partition_handling).") for m in ("hub", *NODES)}
    print(f"cluster_partition_handling before the partition: {handling}")
    # this test's nodes only: a dead peer is noticed in 7.5-12.5 s instead of 45-75 s
    _eval(lab, "hub", f"rpc:multicall(net_kernel, set_net_ticktime, [{TICK}, 0]).")
    ticks = _eval(lab, "hub", "{Ts, Bad} = rpc:multicall(net_kernel, get_net_ticktime, []), {[{T} || T <- Ts], Bad}.")
    assert ticks == f"{{[{{{TICK}}},{{{TICK}}},{{{TICK}}}],[]}}", ticks

    cut = f"bridge@{lab.addr(CUT)}"
    lab.partition(CUT)
    began = time.monotonic()
    wait_for(
        lambda: cut not in _eval(lab, "hub", "nodes()."), 120, 0.5, what=f"the hub's node seeing {CUT}'s node down"
    )
    print(f"the hub's node saw {CUT}'s node down {time.monotonic() - began:.1f}s after the cut")
    wait_for(lambda: _eval(lab, CUT, "nodes().") == "[]", 120, 0.5, what=f"{CUT}'s node seeing its peers down")
    print(f"{CUT}'s node saw its peers down {time.monotonic() - began:.1f}s after the cut")
    # the majority keeps serving: a quorum inbox with a member on hostA takes and gives messages
    lab.bridge("hub", "send", worker, "during the partition", "--from", main)
    assert [m["content"] for m in poll(lab, HOST, worker, wait="30s")] == ["during the partition"]
    # the cut-off node takes no client meanwhile: nothing is written that the others miss
    wait_for(lambda: not lab.bridge_json(CUT, "broker", "status")["accepting"], 60, 0.5, what=f"{CUT}'s node paused")
    print(f"{CUT}'s node paused {time.monotonic() - began:.1f}s after the cut")

    lab.heal(CUT)
    healed = time.monotonic()
    views: dict[str, tuple[list[str], Any]] = {}
    deadline = healed + 120
    while time.monotonic() < deadline:
        views = _views(lab)
        if _whole(views):
            break
        time.sleep(2)
    print(f"{time.monotonic() - healed:.1f}s after the heal: {views}")
    assert _whole(views), f"the cluster did not heal by itself in 120s: {views}"
    _eval(lab, "hub", "rpc:multicall(net_kernel, set_net_ticktime, [60, 0]).")
    nodes = lab.bridge_json("hub", "hub", "nodes")["nodes"]
    assert [(n["name"], n["running"]) for n in nodes] == [("hub", True), ("hosta", True), ("hostc", True)]
    after = {m: _eval(lab, m, "application:get_env(rabbit, cluster_partition_handling).") for m in ("hub", *NODES)}
    # the paused node kept it through its restart: a next cut pauses it again
    assert set(after.values()) == {"{ok,pause_minority}"}, after

    for text in ("after the heal", "again"):  # both ways, each received once
        lab.bridge("hub", "send", worker, f"{text} from hub", "--from", main)
        assert [m["content"] for m in poll(lab, HOST, worker)] == [f"{text} from hub"]
        lab.bridge(HOST, "send", main, f"{text} from hostB", "--from", worker)
        assert [m["content"] for m in poll(lab, "hub", main)] == [f"{text} from hostB"]
    assert poll(lab, HOST, worker, wait="1s") == [] and poll(lab, "hub", main, wait="1s") == []

    lab.bridge(NEW, "join", lab.bridge("hub", "hub", "invite", NEW.lower()).stdout.strip())
    assert len(broker_uri(lab, NEW).split(",")) == 3
    # two nodes ignore partitions (a survivor would pause whenever its only peer stops)
    assert [j.get("partition_handling") for j in joins] == ["ignore", "pause_minority"]
