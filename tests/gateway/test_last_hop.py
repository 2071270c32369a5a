"""The last hop to a waiting client is two-phase: a message handed to `poll --wait` or
`send --wait` stays recoverable until the client confirms it has printed it.

Each fault is injected into the real gateway and the real CLI: a client killed after the
answer was written, the gateway killed after its commit and before the answer, a commit that
fails. Each ends with the message delivered once or still pollable."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid

import pytest

from tests.multihost.helpers import wait_for
from tests.support.env import BRIDGE_BIN


def _start_poll(host, gid: str) -> subprocess.Popen:
    poll = subprocess.Popen(
        [BRIDGE_BIN, "poll", "--as", gid, "--wait", "60s", "--json"],
        env=host.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: host.waiting(gid), what="the poll waiting in the gateway")
    return poll


def _start_faulty(host, fault: str) -> subprocess.Popen:
    return host.start_gateway(
        command=[sys.executable, "-m", "tests.support.faulty_gateway"], env={"BRIDGE_TEST_FAULT": fault}
    )


def test_a_poll_killed_after_the_answer_was_written_loses_nothing(host_factory):
    a = host_factory("a")
    main = a.register("main", role="main")
    a.register("peer")
    a.start_gateway()
    poll = _start_poll(a, main)
    poll.send_signal(signal.SIGSTOP)  # it cannot read (or print) what the gateway writes it
    try:
        sent = a.bridge_json("send", main, "do not lose me", "--from", "peer")
        wait_for(lambda: "delivered" in a.log(), what="the hand-off")
    finally:
        poll.kill()  # SIGKILL, also for a stopped process
        poll.communicate(timeout=10)
    again = wait_for(
        lambda: a.bridge_json("poll", "--as", main, "--wait", "2s")["messages"], 15, what="the message held again"
    )
    assert [(m["msgId"], m["content"]) for m in again] == [(sent["msgId"], "do not lose me")]
    assert again[0]["redelivered"] is True  # the killed reader may have printed it
    assert a.bridge_json("poll", "--as", main, "--wait", "1s")["messages"] == [], "once"
    assert "unconfirmed messages held again" in a.log()
    assert "local API operation failed" not in a.log() and "Traceback" not in a.log()


def test_a_confirmed_poll_and_send_wait_leave_nothing_behind(host_factory):
    a = host_factory("a")
    main = a.register("main", role="main")
    worker = a.register("worker")
    a.start_gateway()
    poll = _start_poll(a, worker)
    asking = subprocess.Popen(
        [BRIDGE_BIN, "send", worker, "status?", "--from", "main", "--wait", "30s"],
        env=a.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = poll.communicate(timeout=30)
    assert poll.returncode == 0, err
    [request] = json.loads(out)["messages"]
    assert "redelivered" not in request  # handed over once
    a.bridge("reply", request["msgId"], "all green", "--from", "worker", check=True)
    out, err = asking.communicate(timeout=30)
    assert asking.returncode == 0 and out.strip() == "all green", err
    # both were confirmed: nothing comes back, not even after a gateway restart
    a.stop_gateway()
    a.start_gateway()
    assert a.bridge_json("poll", "--as", worker, "--wait", "1s")["messages"] == []
    assert a.bridge_json("poll", "--as", main, "--wait", "1s")["messages"] == []


_REQUEUED = {
    "handoff-commit-fails:1": "store commit failed; burst requeued",
    "burst-raises:1": "burst failed; requeued",
}


@pytest.mark.parametrize("fault", ["handoff-after-commit:1", "handoff-commit-fails:1", "burst-raises:1"])
def test_a_gateway_fault_at_the_hand_off_loses_nothing(host_factory, fault):
    a = host_factory("a")
    main = a.register("main", role="main")
    a.register("peer")
    if fault in _REQUEUED:
        a.expect_log_errors(_REQUEUED[fault])
    gateway = _start_faulty(a, fault)
    poll = _start_poll(a, main)
    msg_id = str(uuid.uuid4())
    # the sender goes through the same gateway, which may die before confirming its publish
    a.bridge("send", main, "hand me over", "--from", "peer", "--id", msg_id)
    out, _ = poll.communicate(timeout=60)
    if fault.startswith("handoff-after-commit"):
        assert a.wait_gateway_exit(30) == -9 and poll.returncode != 0, "the gateway died before answering"
        a.start_gateway()
        got = a.bridge_json("poll", "--as", main, "--wait", "5s")["messages"]
        assert "held again: messages no client confirmed" in a.log()
        assert [m.get("redelivered") for m in got] == [True]
    else:  # the gateway lives: the burst is requeued, redelivered, and handed over then
        assert gateway.poll() is None and poll.returncode == 0
        got = json.loads(out)["messages"]
        assert _REQUEUED[fault] in a.log()
    assert [(m["msgId"], m["content"]) for m in got] == [(msg_id, "hand me over")]
    assert a.bridge_json("poll", "--as", main, "--wait", "1s")["messages"] == [], "once"


def test_a_consuming_channel_the_broker_closed_is_reopened_and_nothing_is_lost(host_factory):
    """A channel error (here a delivery acked twice) closes the consuming channel while the
    connection lives: the gateway reconnects instead of sitting on a dead consumer."""
    a = host_factory("a")
    main = a.register("main", role="main")
    a.register("peer")
    _start_faulty(a, "ack-twice:1")
    first = a.bridge_json("send", main, "one", "--from", "peer")
    wait_for(lambda: "broker connection lost" in a.log(), what="the gateway to notice the closed channel")
    a.wait_connected()
    second = a.bridge_json("send", main, "two", "--from", "peer")
    got = wait_for(
        lambda: (m := a.bridge_json("poll", "--as", main, "--wait", "2s")["messages"]) and m, 30, what="messages"
    )
    got += a.bridge_json("poll", "--as", main, "--wait", "2s")["messages"]
    assert sorted(m["msgId"] for m in got) == sorted([first["msgId"], second["msgId"]])
