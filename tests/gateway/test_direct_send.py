"""Sending without a gateway: the direct path to the broker."""

from __future__ import annotations

import uuid

from bridgecli.errors import ExitCode


def test_a_direct_send_to_a_gid_asks_the_broker_not_the_roster(host_factory):
    """Without any gateway, a send to a full gid goes straight to the broker: an inbox that
    exists takes it (nobody announces it in a roster), a gid without one is refused (exit 9)."""
    a, b = host_factory("a"), host_factory("b")
    a.register("main", role="main")
    worker = b.register("worker")  # its inbox is declared now; no gateway runs anywhere
    sent = a.bridge_json("send", worker, "straight to the inbox", "--from", "main")
    assert sent["to"] == worker
    nobody = a.bridge("send", str(uuid.uuid4()), "to nowhere", "--from", "main")
    assert nobody.returncode == ExitCode.REJECTED, nobody.stderr
    b.start_gateway()
    got = b.bridge_json("poll", "--as", worker, "--wait", "10s")["messages"]
    assert [(m["msgId"], m["content"]) for m in got] == [(sent["msgId"], "straight to the inbox")]
