"""A hub and joining hosts, each a network namespace: the lab of the two-command join.

Unlike the shared ``netns_lab`` (a RabbitMQ node of the test suite's), here the broker
namespace holds a *bridge installation*, ``hub``, that runs ``bridge hub start`` itself;
hostB and hostC have no broker settings at all until ``bridge join`` writes them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import make_home
from tests.support.netns import Host, NetnsLab, netns_supported

JOINERS = ("hostB", "hostC")


def hub_home(lab: NetnsLab) -> Host:
    """The hub machine: the broker namespace with bridge's own XDG dirs and host id ``hub``."""
    home = make_home(lab.root / "hub")
    home.env.update({"BRIDGE_HOST_ID": "hub", "BRIDGE_ROSTER_INTERVAL": "1", "BRIDGE_BROKER_HEARTBEAT": "2"})
    host = Host("hub", lab.ns("broker"), lab.broker_addr, home)
    lab.members["hub"] = host
    return host


def build(root: Path) -> NetnsLab:
    """Namespaces for hub, hostB and hostC; the hub started; nobody joined yet. As the README
    has it: the hub machine first runs its broker and gateway (`./dev run`), then `bridge hub
    start` turns that broker into the hub under the running gateway."""
    lab = NetnsLab(root, hosts=JOINERS, start_broker=False, prefix=f"bh{os.getpid()}")
    lab.setup()
    for name in JOINERS:  # a fresh machine: nothing but what `bridge join` will write
        for key in ("BRIDGE_BROKER_URI", "BRIDGE_HOST_ID"):
            lab.host(name).env.pop(key, None)
    hub_home(lab)
    lab.bridge("hub", "broker", "start", timeout=180)
    lab.start_gateway("hub")
    mark = len(lab.gateway_text("hub"))
    lab.bridge("hub", "hub", "start", "--listen", lab.broker_addr, timeout=180)
    lab.wait_log("hub", "connected to broker", timeout=60, after=mark)  # back on the hub's node
    return lab


def invite(lab: NetnsLab, host_id: str, *args: str) -> str:
    return lab.bridge("hub", "hub", "invite", host_id, *args).stdout.strip()


def join(lab: NetnsLab, name: str) -> None:
    """``bridge hub invite`` on the hub, ``bridge join`` on ``name``: the whole recipe."""
    lab.bridge(name, "join", invite(lab, name.lower()))


def broker_uri(lab: NetnsLab, name: str) -> str:
    """The broker.uri that join wrote on ``name`` (with its password: tests only)."""
    return tomllib.loads(lab.host(name).home.config_file.read_text())["broker"]["uri"]


def ca_file(lab: NetnsLab, name: str) -> str:
    return tomllib.loads(lab.host(name).home.config_file.read_text())["broker"]["tls_ca"]


def as_host(lab: NetnsLab, name: str, fn: Callable[[Any], Any]) -> Any:
    """Run ``fn(connection)`` in ``name``'s namespace on a pika connection with the broker
    user and TLS files that join gave that host."""
    import ssl

    import pika

    uri, ca = broker_uri(lab, name), ca_file(lab, name)

    def work() -> Any:
        params = pika.URLParameters(uri)
        params.ssl_options = pika.SSLOptions(ssl.create_default_context(cafile=ca), params.host)
        connection = pika.BlockingConnection(params)
        try:
            return fn(connection)
        finally:
            if connection.is_open:
                connection.close()

    return lab.in_ns(name, work)


def as_hub_guest(lab: NetnsLab, fn: Callable[[Any], Any]) -> Any:
    """Run ``fn(connection)`` on the hub machine as its own user on loopback (an operator's view)."""
    import json

    import pika

    state = json.loads((lab.host("hub").home.data_dir / "broker" / "state.json").read_text())

    def work() -> Any:
        connection = pika.BlockingConnection(pika.URLParameters(state["uri"]))
        try:
            return fn(connection)
        finally:
            if connection.is_open:
                connection.close()

    return lab.in_ns("broker", work)


def queue_depth(lab: NetnsLab, queue: str) -> int:
    return as_hub_guest(lab, lambda c: c.channel().queue_declare(queue, passive=True).method.message_count)


def running_lab(prefix: str) -> Iterator[NetnsLab]:
    """The hub running, hostB joined with its gateway and the hub's own gateway running; the
    body of the module-scoped ``hub_lab`` here and of the security suite's package-scoped one."""
    reason = netns_supported()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    lab = NetnsLab(root)
    failures: list[str] = []
    try:
        lab = build(root)
        join(lab, "hostB")
        lab.start_gateway("hostB")
        yield lab
    finally:
        failures = lab.teardown()  # the gateways' teardown check, then the cleanup
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


@pytest.fixture(scope="module")
def hub_lab() -> Iterator[NetnsLab]:
    """See :func:`running_lab`."""
    yield from running_lab("bhub")


@contextlib.contextmanager
def cluster_hub(prefix: str, machines: tuple[str, ...], hub_gateway: bool = True) -> Iterator[NetnsLab]:
    """Namespaces for the hub and ``machines`` (no broker settings of their own), the hub
    started with ``--cluster`` (and its gateway); stops every gateway and node at the end.
    The body of the cluster tests' module fixtures, which then join nodes and hosts."""
    reason = netns_supported()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    lab = NetnsLab(root, hosts=machines, start_broker=False, prefix=f"{prefix}{os.getpid()}")
    try:
        lab.setup()
        for name in machines:
            for key in ("BRIDGE_BROKER_URI", "BRIDGE_HOST_ID"):
                lab.host(name).env.pop(key, None)
        hub_home(lab)
        lab.bridge("hub", "hub", "start", "--listen", lab.broker_addr, "--cluster", timeout=180)
        if hub_gateway:
            lab.start_gateway("hub")
        yield lab
    finally:
        for name in ("hub", *machines):
            try:
                lab.stop_gateway(name)
                lab.bridge(name, "hub" if name == "hub" else "broker", "stop", check=False, timeout=60)
            except Exception as exc:  # the teardown below kills what is left
                print(f"stopping {name}: {exc}")
        lab.teardown()
        shutil.rmtree(root, ignore_errors=True)
