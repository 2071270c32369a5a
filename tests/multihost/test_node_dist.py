"""Two RabbitMQ nodes on two namespace "machines" cluster over mutually verified TLS.

What a 3-node hub cluster across machines will stand on (:mod:`bridgecli.node_dist`): nodes
named ``bridge@<address>``, distribution over TLS on one fixed port with certificates from
the hub CA, no epmd. A third machine with the *same cookie* but no CA-signed certificate,
or speaking plain TCP distribution, cannot reach the nodes; no epmd listens on the network.
Everything node-side runs on a thread inside the machine's namespace (:meth:`NetnsLab.in_ns`),
so the node and its CLI tools inherit that machine's network stack.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pika
import pytest

from bridgecli.errors import ClusterPeerUnreachable
from bridgecli.hub.pki import HubPki
from bridgecli.localbroker import rabbitmq_bin_dir
from bridgecli.node_dist import CLUSTER_DIST_PORT, ClusterNode, DistTls
from tests.support.netns import NetnsLab, netns_supported

pytestmark = [pytest.mark.netns, pytest.mark.slow]

COOKIE = "BRIDGETESTCLUSTERCOOKIE"
QUEUE = "inbox.dist-test"


@dataclass
class Machine:
    """One namespace host: its address, its node's TLS files and (maybe) its node."""

    name: str
    addr: str
    dist: DistTls
    node: ClusterNode


def _tls_files(directory: Path, signer: HubPki, hub: HubPki, addr: str) -> DistTls:
    """A node key and certificate issued by ``signer``, and the ``hub`` CA to trust (every
    joined host has it), written 0600 under ``directory``."""
    directory.mkdir(mode=0o700, parents=True)
    key, cert = signer.issue_node_cert(f"node-{addr}", [addr])
    files = {"node.key": key, "node.pem": cert, "ca.pem": hub.ca_cert.read_bytes()}
    for name, data in files.items():
        (directory / name).write_bytes(data)
        (directory / name).chmod(0o600)
    return DistTls(addr, directory / "node.pem", directory / "node.key", directory / "ca.pem")


@pytest.fixture(scope="module")
def machines() -> Iterator[tuple[NetnsLab, dict[str, Machine], HubPki]]:
    """Namespaces hostA, hostB (cluster nodes, not started) and hostC (the hostile one,
    whose certificate comes from another CA, though it trusts the hub CA); stops every node
    and the lab at the end."""
    reason = netns_supported()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="bnd", dir="/tmp"))
    lab = NetnsLab(root, hosts=("hostA", "hostB", "hostC"), start_broker=False, prefix=f"bnd{os.getpid()}")
    found: dict[str, Machine] = {}
    try:
        lab.setup()
        hub, rogue = HubPki(root / "hub-pki"), HubPki(root / "rogue-pki")
        hub.ensure_ca("dist-test")
        rogue.ensure_ca("rogue")
        for name in ("hostA", "hostB", "hostC"):
            addr = lab.addr(name)
            dist = _tls_files(root / f"tls-{name}", rogue if name == "hostC" else hub, hub, addr)
            found[name] = Machine(name, addr, dist, ClusterNode(root / f"node-{name}", dist, cookie=COOKIE))
        yield lab, found, hub
    finally:
        for machine in found.values():
            machine.node.stop(timeout=20)
        lab.teardown()
        shutil.rmtree(root, ignore_errors=True)


def _rabbitmqctl(lab: NetnsLab, host: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """``rabbitmqctl ARGS`` run inside ``host``'s namespace with ``env`` (a node's CLI env)."""
    return subprocess.run(
        ["ip", "netns", "exec", lab.ns(host), str(rabbitmq_bin_dir() / "rabbitmqctl"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def _erl_ping(lab: NetnsLab, host: str, home: Path, target: str, *dist_args: str) -> str:
    """What ``net_adm:ping(target)`` answers from a bare Erlang node in ``host``."""
    home.mkdir(mode=0o700, exist_ok=True)
    (home / ".erlang.cookie").write_text(COOKIE)
    (home / ".erlang.cookie").chmod(0o400)
    probe = f"probe@{lab.addr(host)}"
    result = subprocess.run(
        ["ip", "netns", "exec", lab.ns(host), "erl", "-noshell", "-hidden", "-name", probe, *dist_args]
        + ["-start_epmd", "false", "-erl_epmd_port", str(CLUSTER_DIST_PORT), "-dist_listen", "false"]
        + ["-eval", f"io:format(\"~p~n\", [net_adm:ping('{target}')]), halt()."],
        env={"HOME": str(home), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    # the TLS layer may print a NOTICE REPORT (e.g. about verify_none) around the answer
    answers = [line.strip() for line in result.stdout.splitlines() if line.strip() in ("pong", "pang")]
    return answers[-1] if len(answers) == 1 else result.stdout[-300:] + result.stderr[-300:]


def _reaches(lab: NetnsLab, host: str, addr: str, port: int) -> bool:
    def connect() -> bool:
        try:
            with socket.create_connection((addr, port), timeout=3):
                return True
        except OSError:
            return False

    return lab.in_ns(host, connect)


def test_two_machines_cluster_over_mutual_tls(machines):
    lab, m, _hub = machines
    a, b, c = m["hostA"], m["hostB"], m["hostC"]
    lab.in_ns("hostA", lambda: a.node.start(90))
    lab.in_ns("hostB", lambda: b.node.start(90))

    # a peer that does not answer: a one-line error, and node B keeps running alone
    with pytest.raises(ClusterPeerUnreachable, match="does not answer over TLS distribution"):
        lab.in_ns("hostB", lambda: b.node.join_cluster(f"bridge@{c.addr}"))
    assert lab.in_ns("hostB", b.node.cluster_status).running == [b.node.nodename]

    join_s = lab.in_ns("hostB", lambda: b.node.join_cluster(a.node.nodename))
    print(f"join of {b.node.nodename} to {a.node.nodename}: {join_s:.1f}s")
    both = sorted([a.node.nodename, b.node.nodename])
    for machine in (a, b):
        status = lab.in_ns(machine.name, machine.node.cluster_status)
        assert (status.members, status.running) == (both, both), machine.name

    # a quorum queue with a member on each machine: published (confirmed) on A, read on B
    def publish() -> None:
        conn = pika.BlockingConnection(pika.URLParameters(a.node.uri))
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            args = {"x-queue-type": "quorum", "x-quorum-initial-group-size": 2}
            ch.queue_declare(QUEUE, durable=True, arguments=args)
            ch.basic_publish("", QUEUE, b"across machines", pika.BasicProperties(delivery_mode=2), mandatory=True)
        finally:
            conn.close()

    def read() -> bytes | None:
        conn = pika.BlockingConnection(pika.URLParameters(b.node.uri))
        try:
            _method, _props, body = conn.channel().basic_get(QUEUE, auto_ack=True)
            return body
        finally:
            conn.close()

    lab.in_ns("hostA", publish)
    # (not list_queues: it streams from every node back to the CLI, which cannot listen)
    quorum = lab.in_ns("hostA", lambda: a.node.ctl("quorum_status", QUEUE, "-q", tool="rabbitmq-queues", timeout=20))
    assert a.node.nodename in quorum.stdout and b.node.nodename in quorum.stdout, quorum.stdout
    assert lab.in_ns("hostB", read) == b"across machines"

    # the other machines: B's own CLI env reaches A (the control), C's same cookie does not
    assert _rabbitmqctl(lab, "hostB", b.node.env(), "-n", a.node.nodename, "status").returncode == 0
    c.node.home.mkdir(mode=0o700, parents=True)
    (c.node.home / ".erlang.cookie").write_text(COOKIE)
    (c.node.home / ".erlang.cookie").chmod(0o400)
    c.node.optfile.write_text(c.dist.optfile_text())  # a certificate from another CA
    hostile = _rabbitmqctl(lab, "hostC", c.node.env(), "-n", a.node.nodename, "status")
    assert hostile.returncode != 0 and "unable to perform an operation" in hostile.stdout + hostile.stderr
    tls_args = ("-proto_dist", "inet_tls", "-ssl_dist_optfile", str(c.node.optfile))
    assert _erl_ping(lab, "hostC", lab.root / "probe-rogue", a.node.nodename, *tls_args) == "pang"
    no_cert = lab.root / "no-cert.conf"
    no_cert.write_text(f'[{{client,[{{cacertfile,"{c.dist.cafile}"}},{{verify,verify_none}}]}}].\n')
    no_cert_args = ("-proto_dist", "inet_tls", "-ssl_dist_optfile", str(no_cert))
    assert _erl_ping(lab, "hostC", lab.root / "probe-nocert", a.node.nodename, *no_cert_args) == "pang"
    assert _erl_ping(lab, "hostC", lab.root / "probe-tcp", a.node.nodename) == "pang"  # plain TCP dist

    # the distribution port is open to the network, epmd's is not (nothing listens on it)
    assert _reaches(lab, "hostC", a.addr, CLUSTER_DIST_PORT)
    assert not _reaches(lab, "hostC", a.addr, 4369)
    listening = subprocess.run(["ip", "netns", "exec", lab.ns("hostA"), "ss", "-ltnH"], capture_output=True, text=True)
    # a local tool may start an epmd, which ERL_EPMD_ADDRESS keeps on loopback
    exposed = [line for line in listening.stdout.splitlines() if ":4369" in line and "127.0.0.1:" not in line]
    assert not [line for line in exposed if "[::1]:" not in line], listening.stdout
    # both nodes still form the cluster after the attempts, and B rejoins it after a restart
    assert lab.in_ns("hostA", a.node.cluster_status).running == both
    began = time.monotonic()
    lab.in_ns("hostB", lambda: b.node.restart(90))
    print(f"restart of {b.node.nodename} in the cluster: {time.monotonic() - began:.1f}s")
    assert lab.in_ns("hostA", a.node.cluster_status).running == both
