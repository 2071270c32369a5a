"""Failure paths of the messaging core against real RabbitMQ nodes: hostile bodies, repeated
delivery failures, kill -9 mid-burst, broker restart mid-stream, consumer_timeout, conflicts."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pika
import pytest

from bridgecli.envelope import Envelope
from bridgecli.errors import ExitCode


def _channel(uri: str):
    connection = pika.BlockingConnection(pika.URLParameters(uri))
    return connection, connection.channel()


def _valid_body(to: str, content: str = "ok", msg_id: str | None = None) -> bytes:
    return Envelope(
        kind="SEND", sender=str(uuid.uuid4()), recipient=to, content=content, msg_id=msg_id or str(uuid.uuid4())
    ).to_bytes()


def _dlq_rows(host, gid: str) -> list[dict]:
    rows = host.bridge_json("dlq", "list", "--limit", "10000")["dead_letters"]
    return [r for r in rows if r["routing_key"] == gid or gid in (r["queue"] or "")]


def _drain_all(host, gid: str, expected: int, timeout: float = 60) -> list[dict]:
    got: list[dict] = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        got += host.bridge_json("poll", "--as", gid, "--wait", "2s", "--limit", "10000")["messages"]
    return got


def test_hostile_bodies_are_dead_lettered_with_reasons_and_the_gateway_keeps_serving(host_factory, rabbitmq):
    a = host_factory("a", extra_env={"BRIDGE_MESSAGING_MAX_CONTENT_BYTES": "1000"})
    gid = a.register("victim", role="main")
    a.start_gateway()
    other = str(uuid.uuid4())
    base = json.loads(_valid_body(gid))
    hostile = {
        "bad_json": b"{not json",
        "invalid_utf8": b'{"v":1,"content":"\xff\xfe"}',
        "unknown_version": json.dumps({**base, "v": 99}).encode(),
        "missing_field": json.dumps({k: v for k, v in base.items() if k != "from"}).encode(),
        "oversize": _valid_body(gid, "x" * 5000),
        "recipient_mismatch": _valid_body(other),
        "not_an_object": b"[1,2,3]",
        "bad_field": json.dumps({**base, "kind": "RM -RF"}).encode(),
    }
    connection, channel = _channel(rabbitmq.uri)
    channel.confirm_delivery()
    for reason, body in hostile.items():
        channel.basic_publish(
            "bridge.msg",
            gid,
            body,
            pika.BasicProperties(message_id=f"hostile-{reason}", delivery_mode=2),
            mandatory=True,
        )
    channel.basic_publish("bridge.msg", gid, _valid_body(gid, "still alive"), pika.BasicProperties(delivery_mode=2))
    connection.close()
    got = _drain_all(a, gid, 1)
    assert [m["content"] for m in got] == ["still alive"]
    rows = {r["id"]: r for r in _dlq_rows(a, gid) if r["id"].startswith("hostile-")}
    assert {rid: r["reason"] for rid, r in rows.items()} == {f"hostile-{k}": k for k in hostile}
    assert all(r["queue"] == f"agent.{gid}.inbox" for r in rows.values())
    assert a.gateway.poll() is None, "gateway died on hostile input"
    # dlq show + purge of our own rows via retry to a queue that no longer routes is not needed;
    shown = a.bridge_json("dlq", "show", "hostile-bad_json")
    assert shown["body"] == "{not json" and shown["reason"] == "bad_json"


def test_repeated_delivery_failures_dead_letter_after_max_attempts_then_retry(host_factory, tmp_path):
    a = host_factory("a", extra_env={"BRIDGE_MESSAGING_MAX_ATTEMPTS": "3"})
    flag = tmp_path / "fixed"
    out = tmp_path / "out"
    a.register("main", role="main")
    gid = a.register("flaky", deliver=f"exec:test -e {flag} && cat >> {out}")
    a.start_gateway()
    sent = a.bridge_json("send", "flaky", "try me", "--from", "main")
    deadline = time.monotonic() + 60
    rows = []
    while time.monotonic() < deadline and not rows:
        rows = [r for r in _dlq_rows(a, gid) if r["id"] == sent["msgId"]]
        time.sleep(0.5)
    assert rows, a.log()
    assert rows[0]["reason"] == "delivery_failed" and rows[0]["attempts"] == 3
    assert "exited 1" in rows[0]["detail"]
    flag.touch()
    a.bridge("dlq", "retry", sent["msgId"], check=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (out.exists() and "try me" in out.read_text()):
        time.sleep(0.2)
    assert "try me" in out.read_text()


def test_unregister_moves_waiting_messages_to_the_dlq(host_factory):
    a = host_factory("a")
    a.register("main", role="main")
    gid = a.register("gone")  # no gateway: messages wait in the inbox
    ids = [a.bridge_json("send", "gone", f"m{i}", "--from", "main")["msgId"] for i in range(3)]
    proc = a.bridge("unregister", "gone", "--json", check=True)
    assert json.loads(proc.stdout)["dead_lettered"] == 3
    reasons = {r["id"]: r["reason"] for r in _dlq_rows(a, gid)}
    assert {reasons[i] for i in ids} == {"recipient_unregistered"}
    again = a.bridge("send", gid, "hi", "--from", "main", "--force")
    assert again.returncode == ExitCode.REJECTED


@pytest.mark.slow
def test_kill_9_mid_burst_loses_nothing_and_duplicates_nothing(host_factory, rabbitmq):
    a = host_factory("a")
    gid = a.register("sink", role="main")
    a.start_gateway()
    total = 2000
    ids = [str(uuid.uuid4()) for _ in range(total)]

    def publish() -> None:
        connection, channel = _channel(rabbitmq.uri)
        channel.confirm_delivery()
        for msg_id in ids:
            channel.basic_publish(
                "bridge.msg",
                gid,
                _valid_body(gid, msg_id, msg_id),
                pika.BasicProperties(message_id=msg_id, delivery_mode=2),
                mandatory=True,
            )
        connection.close()

    publisher = threading.Thread(target=publish)
    publisher.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = a.bridge_json("status")
        if status["entities"][0]["held"] >= 300:
            break
        time.sleep(0.05)
    a.kill_gateway()
    # mid-burst: what the dead gateway had committed is some of the burst, not all of it
    with sqlite3.connect(Path(a.env["XDG_STATE_HOME"]) / "bridge" / "gateway.db") as db:
        [(stored,)] = db.execute("SELECT COUNT(*) FROM messages WHERE recipient = ?", (gid,)).fetchall()
    assert 300 <= stored < total, f"the gateway had {stored} of {total} when killed"
    publisher.join(60)
    a.start_gateway()
    got = _drain_all(a, gid, total, timeout=120)
    contents = [m["content"] for m in got]
    assert len(contents) == total, f"{len(contents)} of {total}"
    assert sorted(contents) == sorted(ids)  # every one exactly once
    assert _drain_all(a, gid, 1, timeout=2) == []


@pytest.mark.slow
def test_broker_restart_mid_stream_keeps_every_confirmed_message(host_factory, rabbitmq_node_factory):
    node = rabbitmq_node_factory([])
    a = host_factory("a", broker_uri=node.uri)
    gid = a.register("sink", role="main")
    a.start_gateway()
    confirmed: list[str] = []
    stop = threading.Event()

    def publish() -> None:
        while not stop.is_set():
            try:
                connection, channel = _channel(node.uri)
                channel.confirm_delivery()
                while not stop.is_set():
                    msg_id = str(uuid.uuid4())
                    channel.basic_publish(
                        "bridge.msg",
                        gid,
                        _valid_body(gid, msg_id, msg_id),
                        pika.BasicProperties(message_id=msg_id, delivery_mode=2),
                        mandatory=True,
                    )
                    confirmed.append(msg_id)
                    time.sleep(0.002)
            except Exception:
                time.sleep(0.3)

    publisher = threading.Thread(target=publish)
    publisher.start()
    time.sleep(1.0)
    node.restart()
    time.sleep(1.0)
    stop.set()
    publisher.join(30)
    a.wait_connected(60)
    got = _drain_all(a, gid, len(confirmed), timeout=120)
    contents = {m["content"] for m in got}
    assert set(confirmed) <= contents, f"lost {len(set(confirmed) - contents)} confirmed messages"
    assert len(got) == len(contents)
    assert "broker connection lost" in a.log_path.read_text()


def test_a_hold_outlives_consumer_timeout(host_factory, rabbitmq_node_factory):
    node = rabbitmq_node_factory(["consumer_timeout = 2000"])
    # the timeout is only checked on the channel tick (60 s by default): make it 500 ms
    node.ctl("eval", "application:set_env(rabbit, channel_tick_interval, 500).")
    # negative control: a plain consumer that keeps a delivery unacked loses its channel
    connection, channel = _channel(node.uri)
    channel.queue_declare("ct-control", durable=True)
    channel.basic_publish("", "ct-control", b"x")
    channel.basic_qos(prefetch_count=1)
    channel.basic_consume("ct-control", lambda *a: None)
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and channel.is_open:
            connection.process_data_events(time_limit=0.2)
            channel.queue_declare("ct-control", passive=True)  # activity keeps the channel ticking
    except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ChannelWrongStateError):
        pass
    assert not channel.is_open, "the broker did not enforce consumer_timeout on the control consumer"
    connection.close()

    a = host_factory("a", broker_uri=node.uri)
    gid = a.register("main", role="main")
    a.start_gateway()
    a.bridge("send", gid, "hold me", "--from", "main", check=True)
    time.sleep(8)  # four times the consumer timeout
    assert a.gateway.poll() is None
    got = a.bridge_json("poll", "--as", gid)["messages"]
    assert [m["content"] for m in got] == ["hold me"]
    assert "connection lost" not in a.log_path.read_text()


def test_inbox_with_other_arguments_is_a_clear_conflict(host_factory, rabbitmq):
    a = host_factory("a")
    a.register("main", role="main")
    gid = str(uuid.uuid4())
    connection, channel = _channel(rabbitmq.uri)
    channel.queue_declare(f"agent.{gid}.inbox", durable=True, arguments={"x-max-length": 5})
    connection.close()
    from bridgecli.amqp import topology
    from bridgecli.errors import Conflict

    connection, channel = _channel(rabbitmq.uri)
    with pytest.raises(Conflict) as info:
        topology.declare(channel, topology.inbox_queue(gid))
    assert f"queue agent.{gid}.inbox" in str(info.value)
    assert "x-dead-letter-exchange" in str(info.value) or "inequivalent" in str(info.value)
    connection.close()


def test_a_slow_delivery_does_not_stall_heartbeats_and_sigterm_loses_nothing(host_factory, tmp_path):
    # heartbeat 2 s: a delivery that blocked the I/O thread for 8 s would lose the connection
    a = host_factory("a", extra_env={"BRIDGE_BROKER_HEARTBEAT": "2"})
    out = tmp_path / "out"
    a.register("main", role="main")
    a.register("slow", deliver=f"exec:sleep 4; line=$(cat); printf '%s\\n' \"$line\" >> {out}")
    a.start_gateway()
    ids = [a.bridge_json("send", "slow", f"job {i}", "--from", "main")["msgId"] for i in range(3)]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (out.exists() and out.read_text().strip()):
        time.sleep(0.2)
    assert a.stop_gateway() == 0  # SIGTERM while the next delivery is in flight
    a.start_gateway()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len({line for line in out.read_text().splitlines() if line.strip()}) < 3:
        time.sleep(0.3)
    got = [json.loads(line)["msgId"] for line in out.read_text().splitlines() if line.strip()]
    assert sorted(set(got)) == sorted(ids), "a message was lost across the SIGTERM"
    assert "connection lost" not in a.log_path.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["before-commit", "after-commit", "after-ack"])
def test_a_crash_at_each_stage_of_a_burst_loses_and_repeats_nothing(host_factory, rabbitmq, stage):
    """The real gateway, SIGKILLed at one instant of its 2nd burst: records written but not
    committed, committed but not acked, acked. Every message is then held exactly once."""
    import sys

    a = host_factory("a")
    gid = a.register("sink", role="main")
    faulty = a.start_gateway(
        command=[sys.executable, "-m", "tests.support.faulty_gateway"], env={"BRIDGE_TEST_FAULT": f"{stage}:2"}
    )
    ids: list[str] = []
    connection, channel = _channel(rabbitmq.uri)
    channel.confirm_delivery()
    while faulty.poll() is None and len(ids) < 3000:
        for _ in range(100):
            msg_id = str(uuid.uuid4())
            channel.basic_publish(
                "bridge.msg",
                gid,
                _valid_body(gid, msg_id, msg_id),
                pika.BasicProperties(message_id=msg_id, delivery_mode=2),
                mandatory=True,
            )
            ids.append(msg_id)
        time.sleep(0.2)
    connection.close()
    assert a.wait_gateway_exit(30) == -9, f"the fault at {stage} never fired:\n{a.log()}"
    assert "delivered" in a.log(), "it died inside a burst, after delivering others"
    a.start_gateway()
    # one more after the restart: the fault can fire after the last message in flight,
    # and the restarted gateway then has no burst of its own to sync
    connection, channel = _channel(rabbitmq.uri)
    channel.confirm_delivery()
    ids.append(str(uuid.uuid4()))
    channel.basic_publish(
        "bridge.msg", gid, _valid_body(gid, ids[-1], ids[-1]), pika.BasicProperties(message_id=ids[-1], delivery_mode=2)
    )
    connection.close()
    got = _drain_all(a, gid, len(ids), timeout=120)
    assert sorted(m["content"] for m in got) == sorted(ids)  # every one, exactly once
    assert _drain_all(a, gid, 1, timeout=2) == []
    store = a.bridge_json("status")["store"]
    assert store["sync_before_ack"] and store["syncs"] >= 1, store  # the restarted gateway synced its bursts
