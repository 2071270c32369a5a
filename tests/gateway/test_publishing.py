"""The publish lane: local senders' publishes run on a connection of their own, so a publish
waiting for its confirm never stops the gateway's consuming side, and the lane heals by itself
when the broker drops its connection."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import Iterator

from tests.multihost.helpers import wait_for
from tests.support.env import BRIDGE_BIN

#: few roster heartbeats during the test
QUIET = {"BRIDGE_ROSTER_INTERVAL": "60"}


def _connections(node) -> list[tuple[str, str, str]]:
    """(pid, connection name, blocked state) of every client connection."""
    out = node.ctl("list_connections", "pid", "client_properties", "state", "-q", "--no-table-headers").stdout
    rows = []
    for line in out.strip().splitlines():
        pid, props, state = line.split("\t")
        found = re.search(r'\{"connection_name","([^"]*)"\}', props)
        name = found.group(1) if found else ""
        rows.append((pid, name, state))
    return rows


@contextlib.contextmanager
def _refusing_queue(uri: str, gid: str) -> Iterator[None]:
    """A queue bound to ``bridge.msg`` under ``gid`` that refuses (nacks) every publish:
    at most 0 messages, overflow ``reject-publish``."""
    import pika

    connection = pika.BlockingConnection(pika.URLParameters(uri))
    channel = connection.channel()
    try:
        channel.queue_declare(f"full-{gid}", arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
        channel.queue_bind(f"full-{gid}", "bridge.msg", routing_key=gid)
        yield
    finally:
        channel.queue_delete(f"full-{gid}")
        connection.close()


def test_a_publish_held_by_broker_flow_control_does_not_stop_consuming(host_factory, rabbitmq_node_factory):
    node = rabbitmq_node_factory([])
    # heartbeats every 0.5 s keep publishing during the alarm: they go through the lane too, so
    # the consuming connection (which must keep acking to drain queues) is never blocked
    a = host_factory("a", broker_uri=node.uri, extra_env={"BRIDGE_ROSTER_INTERVAL": "0.5"})
    main = a.register("main", role="main")
    a.start_gateway()
    node.ctl("set_vm_memory_high_watermark", "0")  # memory alarm: the broker blocks publishers
    try:
        send = subprocess.Popen(
            [BRIDGE_BIN, "send", main, "sent during the alarm", "--from", "main"],
            env=a.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        wait_for(
            lambda: any(
                name.startswith("bridge-gateway-") and state == "blocked" for _, name, state in _connections(node)
            ),
            20,
            what="the gateway's publish to be blocked",
        )
        assert send.poll() is None, "the send finished although the broker blocks publishers"
        time.sleep(1.5)  # heartbeats due meanwhile
        gateway = {name: state for _, name, state in _connections(node) if name.startswith("bridge-gateway-")}
        consuming = [state for name, state in gateway.items() if not name.endswith(("-publish", "-roster"))]
        # "blocking": the broker would block it if it published; "blocked": it did, and is stalled
        assert len(consuming) == 1 and consuming[0] in ("running", "blocking"), gateway
        # the roster listener only consumes: heartbeats keep arriving during the alarm
        [roster] = [state for name, state in gateway.items() if name.endswith("-roster")]
        assert roster in ("running", "blocking"), gateway
        # the consuming side still works: inbox depths are read on it, a new entity's inbox is
        # declared and consumed on it (with one shared connection both waited for the confirm)
        status = a.bridge_json("status", timeout=20)
        assert [e["ready"] for e in status["entities"]] == [0], status["entities"]
        began = time.monotonic()
        a.register("late", role="agent")
        assert time.monotonic() - began < 10
        assert "late" in {e["label"] for e in a.bridge_json("status")["entities"] if e["consuming"]}
    finally:
        node.ctl("set_vm_memory_high_watermark", "0.4")
    out, err = send.communicate(timeout=60)
    assert send.returncode == 0, err
    got = a.bridge_json("poll", "--as", main, "--wait", "10s")["messages"]
    assert [(m["msgId"], m["content"]) for m in got] == [(out.strip(), "sent during the alarm")]


def test_the_lane_reconnects_after_the_broker_closes_its_connection(host_factory, rabbitmq_node_factory):
    node = rabbitmq_node_factory([])
    a = host_factory("a", broker_uri=node.uri, extra_env=QUIET)
    main = a.register("main", role="main")
    a.start_gateway()
    first = a.bridge("send", main, "before", "--from", "main")
    assert first.returncode == 0, first.stderr
    lane = [pid for pid, name, _ in _connections(node) if name.endswith("-publish")]
    assert len(lane) == 1
    assert a.bridge_json("status")["broker"]["publishing"] is True
    node.ctl("close_connection", lane[0], "test: drop the publish lane")
    wait_for(lambda: a.log_path.read_text().count("publish connection lost") == 1, 20, what="the lane to notice")

    def resend():
        sent = a.bridge("send", main, "after", "--from", "main")
        return sent if sent.returncode == 0 else None

    wait_for(resend, 30, what="a send through the reconnected lane")
    assert a.bridge_json("status")["broker"]["publishing"] is True
    got = a.bridge_json("poll", "--as", main, "--wait", "10s")["messages"]
    assert [m["content"] for m in got][:2] == ["before", "after"]
    assert a.gateway.poll() is None


def test_pipelined_confirms_keep_every_outcome_per_message(host_factory, rabbitmq):
    """Bulk sends are confirmed as a pipeline; each message still gets its own outcome: the
    broker's nack (a full queue refusing publishes) and an unroutable return are errors,
    never reported as sent."""
    from bridgecli.errors import ExitCode

    a = host_factory("a", extra_env=QUIET)
    main = a.register("main", role="main")
    a.start_gateway()
    full = "0f0f0f0f-1111-4222-8333-444455556666"
    with _refusing_queue(rabbitmq.uri, full):
        refused = a.bridge("send", full, "-", "--lines", "--force", "--from", "main", input="one\ntwo\nthree\n")
        assert refused.returncode == ExitCode.REJECTED and "nack" in refused.stderr, refused.stderr
        ghost = "4b0c3a5e-9999-4222-8333-444455556666"
        lost = a.bridge("send", ghost, "-", "--lines", "--force", "--from", "main", input="x\ny\n")
        assert lost.returncode == ExitCode.REJECTED and "no queue is bound" in lost.stderr, lost.stderr
        # --wait overlaps the confirm with the wait for the reply: a refused message still
        # ends the wait at once with the broker's answer, never after the whole --wait
        for target, why in ((full, "nack"), (ghost, "no queue is bound")):
            began = time.monotonic()
            waited = a.bridge("ask", target, "q", "--force", "--from", "main", "--wait", "2m")
            assert waited.returncode == ExitCode.REJECTED and why in waited.stderr, waited.stderr
            assert time.monotonic() - began < 60
        bulk = a.bridge("send", main, "-", "--lines", "--from", "main", input="".join(f"m{i}\n" for i in range(300)))
        assert bulk.returncode == 0 and len(bulk.stdout.split()) == 300, bulk.stderr
        got = []
        while len(got) < 300:
            batch = a.bridge_json("poll", "--as", main, "--wait", "10s")["messages"]
            assert batch, f"only {len(got)} of 300 arrived"
            got.extend(m["content"] for m in batch)
        assert got == [f"m{i}" for i in range(300)]  # in order


def _lane_channels(node) -> set[int]:
    """Channel numbers open on the gateway's publish lane connection."""
    [lane] = [pid for pid, name, _ in _connections(node) if name.endswith("-publish")]
    out = node.ctl("list_channels", "connection", "number", "-q", "--no-table-headers").stdout
    return {
        int(number)
        for line in out.strip().splitlines()
        for connection, number in [line.split("\t")]
        if connection == lane
    }


def test_a_nack_renews_the_lane_channel_and_later_sends_go_through(host_factory, rabbitmq_node_factory):
    """After a nack the lane publishes on a fresh channel: a RabbitMQ channel can keep nacking
    every publish to a quorum queue whose leader moved while it was publishing (the cluster
    failover test), while a new channel is confirmed. Renewing costs nothing visible: the
    refused message is still reported as refused, and the next sends are confirmed."""
    from bridgecli.errors import ExitCode

    node = rabbitmq_node_factory([])
    a = host_factory("a", broker_uri=node.uri, extra_env=QUIET)
    main = a.register("main", role="main")
    a.start_gateway()
    assert a.bridge("send", main, "before", "--from", "main").returncode == 0
    before = _lane_channels(node)
    full = "0f0f0f0f-2222-4222-8333-444455556666"
    with _refusing_queue(node.uri, full):
        # the refused send and a good one right behind it (it may reach the lane while the
        # renewal waits for confirms: it is then published on the new channel)
        refused = subprocess.Popen(
            [BRIDGE_BIN, "send", full, "refused", "--force", "--from", "main"],
            env=a.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        after = a.bridge("send", main, "after", "--from", "main")
        _, err = refused.communicate(timeout=60)
        assert refused.returncode == ExitCode.REJECTED and "nack" in err, err
        assert after.returncode == 0, after.stderr
        wait_for(
            lambda: "publish channel renewed after a nack" in a.log_path.read_text(),
            20,
            what="the lane to renew its channel",
        )
        # one channel replaced (the confirm channel), none leaked
        wait_for(
            lambda: (lambda now: len(now) == len(before) and now != before)(_lane_channels(node)),
            20,
            what=f"the lane's channels {sorted(before)} to be replaced by as many new ones",
        )
        again = a.bridge("send", main, "again", "--from", "main")
        assert again.returncode == 0, again.stderr
    got = a.bridge_json("poll", "--as", main, "--wait", "10s")["messages"]
    assert sorted(m["content"] for m in got) == ["after", "again", "before"]
    assert a.gateway.poll() is None
