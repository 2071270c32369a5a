"""The use cases of docs/design.md#use-cases between two gateways on one machine (separate XDG dirs and host ids),
against the real RabbitMQ node, driven through the real `bridge` CLI."""

from __future__ import annotations

import json
import subprocess
import time

from bridgecli.errors import ExitCode


def _wait_for(predicate, timeout=15.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def _poll(host, gid, wait="5s"):
    return host.bridge_json("poll", "--as", gid, "--wait", wait)["messages"]


def test_u1_delegate_and_reply_across_two_gateways(host_factory):
    a, b = host_factory("a"), host_factory("b")
    main = a.register("main", role="main")
    worker = b.register("worker", role="agent")
    a.start_gateway(), b.start_gateway()

    sent = a.bridge_json("send", worker, "please review PR 7", "--from", "main")
    got = _poll(b, worker)
    assert [m["content"] for m in got] == ["please review PR 7"]
    assert got[0]["from"] == main and got[0]["fromLabel"] == "main" and got[0]["fromHost"] == a.name
    assert got[0]["msgId"] == sent["msgId"]

    # the worker answers with the exact command the framed message tells it to use
    reply = b.bridge("reply", sent["msgId"], "LGTM", env={"BRIDGE_GID": worker}, check=True)
    reply_id = reply.stdout.strip()
    back = _poll(a, main)
    assert [(m["kind"], m["content"], m["inReplyTo"]) for m in back] == [("REPLY", "LGTM", sent["msgId"])]
    assert back[0]["msgId"] == reply_id


def test_blocking_send_resolves_with_the_reply(host_factory):
    a, b = host_factory("a"), host_factory("b")
    a.register("main", role="main")
    worker = b.register("worker")
    a.start_gateway(), b.start_gateway()
    waiting = subprocess.Popen(
        [*_cli(a), "send", worker, "status?", "--from", "main", "--wait", "20s"],
        env=a.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    msg = _wait_for(lambda: _poll(b, worker, "1s"))[0]
    b.bridge("reply", msg["msgId"], "all green", "--from", "worker", check=True)
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 0, err
    assert out.strip() == "all green"


def test_u3_late_reply_is_held_for_a_later_poll(host_factory):
    a, b = host_factory("a"), host_factory("b")
    main = a.register("main", role="main")
    worker = b.register("worker")
    a.start_gateway(), b.start_gateway()
    timed_out = a.bridge("send", worker, "slow task", "--from", "main", "--wait", "1s")
    assert timed_out.returncode == ExitCode.TIMEOUT
    assert "bridge poll" in timed_out.stderr
    msg = _poll(b, worker)[0]
    b.bridge("reply", msg["msgId"], "finally done", "--from", "worker", check=True)
    # the sender's window closed long ago; the reply is held durably until pulled
    a.stop_gateway()
    a.start_gateway()
    held = _poll(a, main)
    assert [(m["kind"], m["content"]) for m in held] == [("REPLY", "finally done")]
    assert _poll(a, main, "0") == []


def test_u2_mid_turn_ask_and_answer(host_factory):
    a, b = host_factory("a"), host_factory("b")
    main = a.register("main", role="main")
    b.register("worker")
    a.start_gateway(), b.start_gateway()
    asking = subprocess.Popen(
        [*_cli(b), "ask", main, "which branch?", "--from", "worker", "--turn", "t-1", "--wait", "20s", "--json"],
        env=b.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    question = _wait_for(lambda: _poll(a, main, "1s"))[0]
    assert question["kind"] == "ASK" and question["turn"] == "t-1"
    a.bridge("answer", question["msgId"], "use main", "--from", "main", check=True)
    out, err = asking.communicate(timeout=30)
    assert asking.returncode == 0, err
    answer = json.loads(out)["reply"]
    assert answer["kind"] == "ANSWER" and answer["content"] == "use main" and answer["turn"] == "t-1"


def test_u6_main_pair_and_u7_orchestrator(host_factory):
    a, b = host_factory("a"), host_factory("b")
    main_a = a.register("opus", role="main")
    main_b = b.register("cloud", role="main")
    orch = a.register("orch", role="orchestrator")
    a.start_gateway(), b.start_gateway()
    a.bridge("send", main_b, "hello from opus", "--from", "opus", check=True)
    m = _poll(b, main_b)[0]
    b.bridge("reply", m["msgId"], "hello opus", "--from", "cloud", check=True)
    assert _poll(a, main_a)[0]["content"] == "hello opus"
    # orchestrator drives a main on another host: same inbox fabric
    a.bridge("send", main_b, "status report please", "--from", "orch", check=True)
    m = _poll(b, main_b)[0]
    assert m["fromLabel"] == "orch"
    b.bridge("reply", m["msgId"], "3 tasks done", "--from", "cloud", check=True)
    assert _poll(a, orch)[0]["content"] == "3 tasks done"


def test_exec_backend_receives_json_and_direct_path_without_gateway(host_factory, tmp_path):
    a = host_factory("a")
    out = tmp_path / "got.jsonl"
    a.register("main", role="main")
    worker = a.register("script", deliver=f"exec:line=$(cat); printf '%s\\n' \"$line\" >> {out}")
    # no gateway yet: the direct path publishes to the broker; the inbox keeps it
    direct = a.bridge("send", "script", "queued while gateway down", "--from", "main")
    assert direct.returncode == 0, direct.stderr
    a.start_gateway()
    lines = _wait_for(lambda: out.exists() and out.read_text().strip().splitlines())
    body = json.loads(lines[0])
    assert body["content"] == "queued while gateway down" and body["to"] == worker
    assert body["authenticatedUser"] == "guest"


def test_delay_delivers_later(host_factory):
    a = host_factory("a")
    main = a.register("main", role="main")
    a.start_gateway()
    start = time.monotonic()
    a.bridge("send", main, "later", "--from", "main", "--delay", "1s", check=True)
    assert _poll(a, main, "0") == []
    got = _poll(a, main, "10s")
    assert [m["content"] for m in got] == ["later"]
    assert time.monotonic() - start >= 0.9


def test_unknown_and_ambiguous_targets_and_oversize(host_factory):
    a = host_factory("a", extra_env={"BRIDGE_MESSAGING_MAX_CONTENT_BYTES": "100"})
    a.register("main", role="main")
    a.start_gateway()
    unknown = a.bridge("send", "nobody", "hi", "--from", "main")
    assert unknown.returncode == ExitCode.NOT_FOUND and "nobody" in unknown.stderr
    big = a.bridge("send", "main", "x" * 101, "--from", "main")
    assert big.returncode == ExitCode.REJECTED and "too large" in big.stderr
    no_sender = a.bridge("send", "main", "hi", "--from", "nobody")
    assert no_sender.returncode == ExitCode.NOT_FOUND and "nobody" in no_sender.stderr
    ghost = a.bridge("send", "4b0c3a5e-1111-4222-8333-444455556666", "hi", "--from", "main", "--force")
    assert ghost.returncode == ExitCode.REJECTED and "no queue is bound" in ghost.stderr


def test_bulk_lines_mode(host_factory):
    a = host_factory("a")
    main = a.register("main", role="main")
    a.start_gateway()
    payload = "\n".join(f"line {i}" for i in range(50)) + "\n"
    proc = a.bridge("send", main, "-", "--lines", "--from", "main", input=payload, check=True)
    assert len(proc.stdout.split()) == 50
    got = _poll(a, main, "5s")
    while len(got) < 50:
        more = _poll(a, main, "2s")
        assert more, f"only {len(got)} of 50 arrived"
        got += more
    assert [m["content"] for m in got] == [f"line {i}" for i in range(50)]


def _cli(host) -> list[str]:
    from tests.support.env import BRIDGE_BIN

    return [BRIDGE_BIN]


def test_resending_with_the_same_id_is_delivered_once(host_factory):
    a = host_factory("a")
    main = a.register("main", role="main")
    a.start_gateway()
    fixed = "3f1e2d3c-4b5a-4697-8a8b-9c0d1e2f3a4b"
    for _ in range(3):  # e.g. a script retrying after a timeout it could not interpret
        assert a.bridge_json("send", main, "once", "--from", "main", "--id", fixed)["msgId"] == fixed
    got = _poll(a, main, "2s")
    assert [m["msgId"] for m in got] == [fixed]
    assert _poll(a, main, "1s") == []
    bad = a.bridge("send", main, "x", "--from", "main", "--id", "not-a-uuid")
    assert bad.returncode == ExitCode.CONFIG and "--id takes a UUID" in bad.stderr


def test_an_exec_entity_can_reply_from_inside_its_own_delivery(host_factory, tmp_path):
    a = host_factory("a")
    main = a.register("main", role="main")
    from tests.support.env import BRIDGE_BIN

    # the handler answers synchronously, while its own delivery is still in progress
    a.register("bot", deliver=f'exec:{BRIDGE_BIN} reply "$BRIDGE_MSG_ID" "pong"')
    a.start_gateway()
    sent = a.bridge_json("send", "bot", "ping", "--from", "main")
    got = _poll(a, main, "10s")
    assert [(m["kind"], m["content"], m["inReplyTo"]) for m in got] == [("REPLY", "pong", sent["msgId"])]
