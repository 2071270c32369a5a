"""The hub grows into a RabbitMQ cluster across namespace machines, with real `bridge` commands.

``hub`` runs ``bridge hub start --cluster``; hostA and hostC become its other nodes with
``bridge hub invite --node`` and ``bridge join --node``; hostB joins afterwards as a host and
gets every node's address. Then the node hostB's gateway is connected to is killed with
SIGKILL and hostB's sends are confirmed again through the survivors.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridgecli.errors import ExitCode
from tests.multihost.helpers import poll, register, wait_announced, wait_for
from tests.multihost.hub_lab import broker_uri, hub_home
from tests.support.netns import NetnsLab, netns_supported

pytestmark = [pytest.mark.netns, pytest.mark.slow]

NODES = ("hostA", "hostC")  # the machines that become cluster nodes
HOST = "hostB"  # the machine that joins as a host after the nodes


@pytest.fixture(scope="module")
def lab() -> Iterator[NetnsLab]:
    """The namespaces, the cluster hub started with its gateway, nobody joined; stops every
    node and gateway at the end."""
    reason = netns_supported()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="bhn", dir="/tmp"))
    lab = NetnsLab(root, hosts=(*NODES, HOST), start_broker=False, prefix=f"bhn{os.getpid()}")
    try:
        lab.setup()
        for name in (*NODES, HOST):
            for key in ("BRIDGE_BROKER_URI", "BRIDGE_HOST_ID"):
                lab.host(name).env.pop(key, None)
        hub_home(lab)
        lab.bridge("hub", "hub", "start", "--listen", lab.broker_addr, "--cluster", timeout=180)
        lab.start_gateway("hub")
        yield lab
    finally:
        for name in ("hub", *NODES, HOST):
            try:
                lab.stop_gateway(name)
                lab.bridge(name, "hub" if name == "hub" else "broker", "stop", check=False, timeout=60)
            except Exception as exc:  # the teardown below kills what is left
                print(f"stopping {name}: {exc}")
        lab.teardown()
        shutil.rmtree(root, ignore_errors=True)


def _amqps_peers(lab: NetnsLab, machine: str) -> set[str]:
    """The addresses with an established connection to ``machine``'s AMQPS port (the
    hub's management API lists only its own node's connections: the others run no agent)."""
    out = subprocess.run(
        ["ip", "netns", "exec", lab.host(machine).ns, "ss", "-Htn", "state", "established", "( sport = :5671 )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.split()[-1].rsplit(":", 1)[0] for line in out.splitlines() if line.split()}


def _on(lab: NetnsLab, machine: str) -> bool:
    """True when hostB has a connection to ``machine``'s node."""
    return lab.addr(HOST) in _amqps_peers(lab, machine)


def test_hub_grows_to_three_nodes_and_a_host_fails_over(lab: NetnsLab):
    hub_main = register(lab, "hub", "hn-main", role="main")  # its inbox lives on the hub's node
    lines = {}
    for name in NODES:
        lines[name] = lab.bridge(
            "hub", "hub", "invite", "--node", name.lower(), "--address", lab.addr(name)
        ).stdout.strip()
        began = time.monotonic()
        joined = lab.bridge_json(name, "join", "--node", lines[name], timeout=240)
        print(f"join --node {name}: {time.monotonic() - began:.1f}s (join_cluster {joined['join_seconds']}s)")
        assert joined["nodename"] == f"bridge@{lab.addr(name)}"
    node_dir = lab.host("hostA").home.root
    assert all(
        p.stat().st_mode & 0o077 == 0 for p in node_dir.rglob("*") if p.name in ("cookie", "node.key", "amqps.key")
    )
    nodes = lab.bridge_json("hub", "hub", "nodes")["nodes"]
    assert [(n["name"], n["running"]) for n in nodes] == [("hub", True), ("hosta", True), ("hostc", True)]
    assert {n["nodename"] for n in lab.bridge_json("hostA", "hub", "nodes")["nodes"]} == {n["nodename"] for n in nodes}

    # the same node invite again (from a machine with no node): refused, with its exit code
    again = lab.bridge(HOST, "join", "--node", lines["hostA"], check=False)
    assert again.returncode == ExitCode.INVITE, again.stderr
    # a host invite on a cluster machine is not a node invite, and vice versa
    wrong = lab.bridge(HOST, "join", lines["hostC"], check=False)
    assert wrong.returncode == ExitCode.INVITE and "--node" in wrong.stderr

    # a host joining now learns every node; put hostA's node first so its gateway is there
    lab.bridge(HOST, "join", lab.bridge("hub", "hub", "invite", "hostb").stdout.strip())
    uris = broker_uri(lab, HOST).split(",")
    assert [re.sub(r".*@", "", u) for u in uris] == [f"{lab.addr(n)}:5671/" for n in ("broker", *NODES)]
    config = lab.host(HOST).home.config_file
    assert tomllib.loads(config.read_text())["messaging"]["inbox_queue_type"] == "quorum"
    reordered = ",".join([uris[1], uris[0], uris[2]])
    config.write_text(config.read_text().replace(",".join(uris), reordered))
    lab.start_gateway(HOST)
    assert _on(lab, "hostA") and not _on(lab, "hub")
    worker = register(lab, HOST, "hn-worker")
    wait_announced(lab, "hub", worker)
    wait_announced(lab, HOST, hub_main)
    lab.bridge("hub", "send", "hn-worker", "hello node", "--from", "hn-main")
    assert [m["content"] for m in poll(lab, HOST, worker)] == ["hello node"]
    lab.bridge(HOST, "send", hub_main, "hello hub", "--from", "hn-worker")
    assert [m["content"] for m in poll(lab, "hub", hub_main)] == ["hello hub"]

    # kill -9 hostA's node under hostB's gateway: its sends are confirmed again via the others
    state = json.loads((lab.host("hostA").home.data_dir / "broker" / "state.json").read_text())
    os.kill(state["pid"], signal.SIGKILL)
    killed = time.monotonic()

    def sent() -> bool:
        return lab.bridge(HOST, "send", hub_main, "after the kill", "--from", "hn-worker", check=False).returncode == 0

    wait_for(sent, 90, 1.0, what="a confirmed send from hostB after its node died")
    print(f"hostB's send confirmed {time.monotonic() - killed:.1f}s after the kill")
    assert [m["content"] for m in poll(lab, "hub", hub_main)] == ["after the kill"]
    assert _on(lab, "hub") or _on(lab, "hostC")
    running = {n["name"]: n["running"] for n in lab.bridge_json("hub", "hub", "nodes")["nodes"]}
    assert running == {"hub": True, "hosta": False, "hostc": True}

    # remove-node: never the hub's own node, never a running one; a dead one is forgotten
    own = lab.bridge("hub", "hub", "remove-node", "hub", check=False)
    assert own.returncode == ExitCode.CONFLICT and "hub's own node" in own.stderr
    live = lab.bridge("hub", "hub", "remove-node", "hostc", check=False)
    assert live.returncode == ExitCode.CONFLICT and "stop it first" in live.stderr
    lab.bridge("hub", "hub", "remove-node", "hosta", timeout=180)
    assert [n["name"] for n in lab.bridge_json("hub", "hub", "nodes")["nodes"]] == ["hub", "hostc"]
