"""The hub grows into a RabbitMQ cluster across namespace machines, with real `bridge` commands.

``hub`` runs ``bridge hub start --cluster``; hostA and hostC become its other nodes with
``bridge hub invite --node`` and ``bridge join --node``; hostB joins afterwards as a host and
gets every node's address; hostD, joined before the nodes, learns them when its gateway
connects. Then the node hostB's gateway is connected to
is killed with SIGKILL, hostB's sends are confirmed again through the survivors, and the node
comes back with a plain ``bridge broker start``. Then the hub machine's node and registrar
are killed: hostB and hostD keep messaging each other through hostA's and hostC's nodes,
and ``bridge hub start`` brings the hub's node back into the cluster.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import ssl
import subprocess
import time
import tomllib
import urllib.request
from collections.abc import Iterator

import pika
import pytest

from bridgecli.errors import ExitCode
from tests.multihost.helpers import poll, poll_until, register, wait_announced, wait_for
from tests.multihost.hub_lab import broker_uri, ca_file, cluster_hub
from tests.support.netns import NetnsLab

pytestmark = [pytest.mark.netns, pytest.mark.slow]

NODES = ("hostA", "hostC")  # the machines that become cluster nodes
HOST = "hostB"  # the machine that joins as a host after the nodes
OTHER = "hostD"  # a second host, joined before the nodes: it learns them


@pytest.fixture(scope="module")
def lab() -> Iterator[NetnsLab]:
    """The namespaces, the cluster hub started with its gateway, nobody joined; stops every
    node and gateway at the end."""
    with cluster_hub("bhn", (*NODES, HOST, OTHER)) as lab:
        yield lab


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


def _on(lab: NetnsLab, machine: str, host: str = HOST) -> bool:
    """True when ``host`` has a connection to ``machine``'s node."""
    return lab.addr(host) in _amqps_peers(lab, machine)


def _quorum_members(lab: NetnsLab) -> dict[str, int]:
    """Every quorum queue and how many members it has (the hub's management API)."""
    port = lab.bridge_json("hub", "hub", "status")["broker"]["management_port"]
    creds = json.loads((lab.host("hub").home.data_dir / "broker" / "credentials.json").read_text())
    auth = base64.b64encode(f"{creds['admin_user']}:{creds['admin_password']}".encode()).decode()

    def work() -> list[dict]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/queues?columns=name,type,members", headers={"Authorization": f"Basic {auth}"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    return {q["name"]: len(q.get("members") or []) for q in lab.in_ns("broker", work) if q["type"] == "quorum"}


def _first(lab: NetnsLab, host: str, machines: tuple[str, ...]) -> None:
    """Rewrite ``host``'s broker.uri so that its nodes come in the order of ``machines``."""
    config = lab.host(host).home.config_file
    uris = broker_uri(lab, host).split(",")
    by_addr = {re.sub(r".*@(.*):5671/$", r"\1", u): u for u in uris}
    ordered = ",".join(by_addr[lab.addr(m)] for m in machines)
    config.write_text(config.read_text().replace(",".join(uris), ordered))


def _dlq_on(lab: NetnsLab, host: str, machine: str) -> int:
    """How many messages bridge.dlq holds, declared (passively, as hosts may) by ``host``'s
    broker user on ``machine``'s node."""
    uri = next(u for u in broker_uri(lab, host).split(",") if f"@{lab.addr(machine)}:" in u)
    context = ssl.create_default_context(cafile=ca_file(lab, host))

    def work() -> int:
        params = pika.URLParameters(uri)
        params.ssl_options = pika.SSLOptions(context, params.host)
        connection = pika.BlockingConnection(params)
        try:
            return int(connection.channel().queue_declare("bridge.dlq", passive=True).method.message_count)
        finally:
            connection.close()

    return lab.in_ns(host, work)


def _exchange(lab: NetnsLab, a: tuple[str, str], b: tuple[str, str], text: str) -> None:
    """One message each way between (host, gid) ``a`` and ``b``: confirmed, received once."""
    for (src, sender), (dst, receiver) in ((a, b), (b, a)):
        lab.bridge(src, "send", receiver, f"{text} from {src}", "--from", sender)
        assert [m["content"] for m in poll(lab, dst, receiver)] == [f"{text} from {src}"]
        assert poll(lab, dst, receiver, wait="1s") == []


def test_hub_grows_to_three_nodes_and_a_host_fails_over(lab: NetnsLab):
    hub_main = register(lab, "hub", "hn-main", role="main")  # its inbox lives on the hub's node
    lab.bridge(OTHER, "join", lab.bridge("hub", "hub", "invite", "hostd").stdout.strip())
    learnt_from = broker_uri(lab, OTHER)
    assert [re.sub(r".*@", "", u) for u in learnt_from.split(",")] == [f"{lab.addr('broker')}:5671/"]
    lines = {}
    for name in NODES:
        lines[name] = lab.bridge(
            "hub", "hub", "invite", "--node", name.lower(), "--address", lab.addr(name)
        ).stdout.strip()
        began = time.monotonic()
        joined = lab.bridge_json(name, "join", "--node", lines[name], timeout=240)
        print(
            f"join --node {name}: {time.monotonic() - began:.1f}s (join_cluster {joined['join_seconds']}s, "
            f"{joined['queues_grown']} queues grown in {joined['grow_seconds']}s)"
        )
        assert joined["queues_grown"] > 0 and joined["queues_not_grown"] == 0
        assert joined["nodename"] == f"bridge@{lab.addr(name)}"
    node_dir = lab.host("hostA").home.root
    assert all(
        p.stat().st_mode & 0o077 == 0 for p in node_dir.rglob("*") if p.name in ("cookie", "node.key", "amqps.key")
    )
    nodes = lab.bridge_json("hub", "hub", "nodes")["nodes"]
    assert [(n["name"], n["running"]) for n in nodes] == [("hub", True), ("hosta", True), ("hostc", True)]
    # the queues declared while the hub was one node grew onto both new nodes
    members = _quorum_members(lab)
    assert "bridge.dlq" in members and set(members.values()) == {3}, members
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

    # hostA's node comes back with a plain `bridge broker start` (its saved cluster settings)
    started = lab.bridge_json("hostA", "broker", "start", "--json", timeout=180)
    assert started["node"] == f"bridge@{lab.addr('hostA')}" and not started["already_running"]
    assert lab.bridge_json("hostA", "broker", "status")["accepting"]
    wait_for(
        lambda: all(n["running"] for n in lab.bridge_json("hub", "hub", "nodes")["nodes"]), 60, 1.0, what="hostA back"
    )
    print(f"hostA's node restarted by `bridge broker start` in {started['seconds']}s")

    # the host joined before the nodes learns them at its gateway's connect, with its own login
    lab.start_gateway(OTHER)
    want = [learnt_from] + [learnt_from.replace(f"@{lab.addr('broker')}:", f"@{lab.addr(n)}:") for n in NODES]
    wait_for(lambda: broker_uri(lab, OTHER).split(",") == want, 15, 0.2, what="hostD learning the nodes")
    lab.stop_gateway(OTHER)
    # then on hostC's node first; hostB's gateway goes back to the hub's node first
    _first(lab, OTHER, ("hostC", "hostA", "broker"))
    lab.start_gateway(OTHER)
    assert _on(lab, "hostC", OTHER)
    other = register(lab, OTHER, "hn-other")
    wait_announced(lab, HOST, other)
    wait_announced(lab, OTHER, worker)
    _exchange(lab, (HOST, worker), (OTHER, other), "before")
    members = _quorum_members(lab)  # the hosts' queues were declared on three nodes
    assert set(members.values()) == {3}, members

    # kill -9 the hub machine's node and registrar: the hosts keep messaging via hostA and hostC
    lab.stop_gateway(HOST)
    _first(lab, HOST, ("broker", "hostA", "hostC"))
    lab.start_gateway(HOST)
    assert _on(lab, "hub")
    registrar = lab.bridge_json("hub", "hub", "status")["registrar"]["pid"]
    hub_state = json.loads((lab.host("hub").home.data_dir / "broker" / "state.json").read_text())
    os.kill(hub_state["pid"], signal.SIGKILL)
    os.kill(registrar, signal.SIGKILL)
    killed = time.monotonic()

    confirmed = {other: 0, worker: 0}

    def both_sent() -> bool:
        for src, sender, to in ((HOST, worker, other), (OTHER, other, worker)):
            if lab.bridge(src, "send", to, "after the hub died", "--from", sender, check=False).returncode != 0:
                return False
            confirmed[to] += 1
        return True

    wait_for(both_sent, 90, 1.0, what="confirmed sends both ways after the hub's node died")
    print(f"sends confirmed both ways {time.monotonic() - killed:.1f}s after the hub's node died ({confirmed})")
    for host, gid in ((OTHER, other), (HOST, worker)):  # each confirmed send arrives once
        got = poll_until(lab, host, gid, confirmed[gid])
        assert [m["content"] for m in got] == ["after the hub died"] * confirmed[gid]
        assert poll(lab, host, gid, wait="1s") == []
    _exchange(lab, (HOST, worker), (OTHER, other), "without the hub")
    assert _on(lab, "hostA") and not _on(lab, "hub")
    assert _dlq_on(lab, OTHER, "hostC") == 0

    # the hub machine restarts its node: it rejoins the cluster
    began = time.monotonic()
    lab.bridge("hub", "hub", "start", timeout=240)
    wait_for(
        lambda: all(n["running"] for n in lab.bridge_json("hub", "hub", "nodes")["nodes"]), 60, 1.0, what="hub back"
    )
    print(f"the hub's node rejoined {time.monotonic() - began:.1f}s after `bridge hub start`")
    _exchange(lab, (HOST, worker), (OTHER, other), "with the hub back")

    # remove-node: never the hub's own node, never a running one; a dead one is forgotten
    own = lab.bridge("hub", "hub", "remove-node", "hub", check=False)
    assert own.returncode == ExitCode.CONFLICT and "hub's own node" in own.stderr
    live = lab.bridge("hub", "hub", "remove-node", "hostc", check=False)
    assert live.returncode == ExitCode.CONFLICT and "stop it first" in live.stderr
    lab.stop_gateway(HOST)  # it may be on hostA's node
    assert lab.bridge_json("hostA", "broker", "stop")["stopped"]
    assert not lab.bridge_json("hostA", "broker", "status")["running"]
    lab.bridge("hub", "hub", "remove-node", "hosta", timeout=180)
    assert [n["name"] for n in lab.bridge_json("hub", "hub", "nodes")["nodes"]] == ["hub", "hostc"]
