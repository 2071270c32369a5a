"""A hub made without ``--cluster``, with a joined host, becomes a cluster hub in place.

``hub`` runs a plain hub (short node name, epmd on loopback) with its gateway; hostB joins
and its gateway stops while a message waits in its inbox. ``bridge hub start --cluster``
converts the running hub: the hub's gateway reconnects by itself, hostB's gateway comes back
with the broker.uri and credentials it saved at its join and receives the waiting message,
and hostC then joins as a second node, through which hostB keeps messaging the hub.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridgecli.amqp import topology
from bridgecli.nodeprocess import amqp_ready
from tests.multihost.helpers import poll, register, wait_announced, wait_for
from tests.multihost.hub_lab import broker_uri, build, join, queue_depth
from tests.support.netns import NetnsLab, netns_supported

pytestmark = [pytest.mark.netns, pytest.mark.slow]


@pytest.fixture
def lab() -> Iterator[NetnsLab]:
    """The plain hub running with its gateway (hub_lab's ``build``); stops every gateway and
    node at the end, then fails on error lines the gateways logged."""
    reason = netns_supported()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="bhc", dir="/tmp"))
    lab = NetnsLab(root)
    failures: list[str] = []
    try:
        lab = build(root)
        yield lab
    finally:
        for name, command in (("hostB", "broker"), ("hostC", "broker"), ("hub", "hub")):
            if name in lab.members:
                lab.stop_gateway(name)
                lab.bridge(name, command, "stop", check=False, timeout=60)
        failures = lab.teardown()
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


class Outage:
    """While in use, polls the hub node's AMQP port on the hub machine every 0.1 s and keeps
    when it first stopped answering and when it answered again."""

    def __init__(self, lab: NetnsLab, port: int) -> None:
        self.lab, self.port = lab, port
        self.down: float | None = None
        self.up: float | None = None
        self._done = threading.Event()

    def _watch(self) -> None:
        while not self._done.is_set():
            answering = amqp_ready("127.0.0.1", self.port, 0.5, expect=b"bridge")
            now = time.monotonic()
            if not answering and self.down is None:
                self.down = now
            elif answering and self.down is not None and self.up is None:
                self.up = now
            time.sleep(0.1)

    def __enter__(self) -> Outage:
        self._thread = threading.Thread(target=lambda: self.lab.in_ns("broker", self._watch, 600), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(10)

    @property
    def seconds(self) -> float | None:
        return None if self.down is None or self.up is None else self.up - self.down


def _contents(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages]


def test_a_plain_hub_becomes_a_cluster_hub_keeping_hosts_and_messages(lab: NetnsLab):
    join(lab, "hostB")
    lab.start_gateway("hostB")
    hub_main = register(lab, "hub", "cv-main", role="main")
    worker = register(lab, "hostB", "cv-worker")
    wait_announced(lab, "hostB", hub_main)
    lab.bridge("hostB", "send", hub_main, "before", "--from", worker)
    assert _contents(poll(lab, "hub", hub_main)) == ["before"]

    # hostB's gateway stops; a message for its entity waits in its inbox on the hub's node
    lab.stop_gateway("hostB")
    lab.bridge("hub", "send", worker, "held across the conversion", "--from", hub_main, "--force")
    inbox = topology.inbox_name(worker)
    assert queue_depth(lab, inbox) == 1
    saved_uri = broker_uri(lab, "hostB")
    before = lab.bridge_json("hub", "broker", "status")
    assert before["node"].endswith("@localhost")

    mark = len(lab.gateway_text("hub"))
    began = time.monotonic()
    with Outage(lab, before["amqp_port"]) as outage:
        converted = lab.bridge_json("hub", "hub", "start", "--cluster", timeout=300)
    took = time.monotonic() - began
    print(f"`hub start --cluster` took {took:.1f}s; the node did not answer AMQP for {outage.seconds}s")
    print(f"changes: {converted['changes']}")
    assert converted["cluster"] and not converted["already_running"]
    assert any(f"renamed node {before['node']}" in change for change in converted["changes"])
    after = lab.bridge_json("hub", "broker", "status")
    assert after["node"] == f"bridge@{lab.broker_addr}" and after["amqp_port"] == before["amqp_port"]
    assert queue_depth(lab, inbox) == 1
    # its queues stay classic until they are migrated: the hub's own config is not switched
    assert lab.bridge("hub", "config", "get", "messaging.inbox_queue_type").stdout.strip() == "classic"
    lab.wait_log("hub", "connected to broker", timeout=60, after=mark)  # the hub's gateway is back

    # hostB comes back with what its join saved and gets the message that waited
    lab.start_gateway("hostB")
    assert _contents(poll(lab, "hostB", worker)) == ["held across the conversion"]
    assert broker_uri(lab, "hostB") == saved_uri
    # a gateway that starts hears the hub's entity from the relay or the hub's next announce
    wait_announced(lab, "hostB", hub_main)
    lab.bridge("hostB", "send", hub_main, "after the conversion", "--from", worker)
    assert _contents(poll(lab, "hub", hub_main)) == ["after the conversion"]

    # a second start changes nothing
    again = lab.bridge_json("hub", "hub", "start", "--cluster", timeout=120)
    assert again["already_running"] and again["changes"] == []

    # the converted hub grows: hostC joins as a node
    line = lab.bridge("hub", "hub", "invite", "--node", "hostc", "--address", lab.addr("hostC")).stdout.strip()
    joined = lab.bridge_json("hostC", "join", "--node", line, timeout=240)
    assert joined["nodename"] == f"bridge@{lab.addr('hostC')}"
    nodes = lab.bridge_json("hub", "hub", "nodes")["nodes"]
    assert [(n["name"], n["running"]) for n in nodes] == [("hub", True), ("hostc", True)]

    # hostB learns the new node at its gateway's next connect, then talks through it alone
    lab.stop_gateway("hostB")
    lab.start_gateway("hostB")
    via_c = saved_uri.replace(f"@{lab.broker_addr}:", f"@{lab.addr('hostC')}:")
    wait_for(lambda: broker_uri(lab, "hostB").split(",") == [saved_uri, via_c], 30, 0.2, what="hostB learning hostC")
    lab.stop_gateway("hostB")
    config = lab.host("hostB").home.config_file
    config.write_text(config.read_text().replace(f"{saved_uri},{via_c}", via_c))
    lab.start_gateway("hostB")
    lab.bridge("hub", "send", worker, "through the new node", "--from", hub_main)
    assert _contents(poll(lab, "hostB", worker)) == ["through the new node"]
    wait_announced(lab, "hostB", hub_main)
    lab.bridge("hostB", "send", hub_main, "back through it", "--from", worker)
    assert _contents(poll(lab, "hub", hub_main)) == ["back through it"]
