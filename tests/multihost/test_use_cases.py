"""The use cases U1-U7 (docs/design.md#use-cases) between hosts that are separate network stacks.

Each host is a network namespace with its own gateway, XDG dirs and host id; the broker is
in a third namespace. Nothing is shared but the LAN, so these prove the design is really
cross-host (no shared loopback, Unix socket or epmd).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from bridgecli.errors import ExitCode
from tests.multihost.helpers import (
    exec_sink,
    poll,
    poll_until,
    read_sink,
    register,
    roster_gids,
    wait_announced,
    wait_for,
)
from tests.support.env import BRIDGE_BIN
from tests.support.netns import NetnsLab, ns_pids

pytestmark = pytest.mark.netns


def test_the_root_namespace_cannot_reach_the_lab(lab: NetnsLab):
    """The safety route is in place: a lab address is unreachable from the root namespace,
    while hostA reaches the broker over its veth."""
    probe = subprocess.run(["ip", "route", "get", lab.broker_addr], capture_output=True, text=True)
    assert probe.returncode != 0 and "No route to host" in probe.stderr
    inside = subprocess.run(
        ["ip", "netns", "exec", lab.host("hostA").ns, "ip", "route", "get", lab.broker_addr],
        capture_output=True,
        text=True,
    )
    assert inside.returncode == 0 and "dev eth0" in inside.stdout
    assert ns_pids(lab.host("hostA").ns), "hostA's gateway runs inside its namespace"


def test_u1_delegate_and_reply(lab: NetnsLab):
    main = register(lab, "hostA", "u1-main", role="main")
    worker = register(lab, "hostB", "u1-worker")
    wait_announced(lab, "hostA", worker)
    sent = lab.bridge_json("hostA", "send", worker, "please review PR 7", "--from", "u1-main")
    got = poll(lab, "hostB", worker)
    assert [m["content"] for m in got] == ["please review PR 7"]
    assert got[0]["msgId"] == sent["msgId"] and got[0]["fromHost"] == "hosta"
    assert got[0]["user"] == "guest"  # the broker-authenticated publisher, shown to the recipient
    reply_id = lab.bridge("hostB", "reply", sent["msgId"], "LGTM", "--from", "u1-worker").stdout.strip()
    back = poll(lab, "hostA", main)
    assert [(m["kind"], m["content"], m["inReplyTo"], m["msgId"]) for m in back] == [
        ("REPLY", "LGTM", sent["msgId"], reply_id)
    ]
    human = lab.bridge("hostA", "show", reply_id).stdout
    assert "[user guest]" in human and "@hostb" in human


def test_u2_mid_turn_ask_and_answer(lab: NetnsLab):
    main = register(lab, "hostA", "u2-main", role="main")
    register(lab, "hostB", "u2-worker")
    wait_announced(lab, "hostB", main)
    host_b = lab.host("hostB")
    asking = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            host_b.ns,
            BRIDGE_BIN,
            "ask",
            main,
            "which branch?",
            "--from",
            "u2-worker",
            "--turn",
            "t-1",
            "--wait",
            "30s",
            "--json",
        ],
        env=host_b.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        question = poll_until(lab, "hostA", main, 1)[0]
        assert question["kind"] == "ASK" and question["turn"] == "t-1" and question["fromHost"] == "hostb"
        lab.bridge("hostA", "answer", question["msgId"], "use main", "--from", "u2-main")
        out, err = asking.communicate(timeout=40)
    finally:
        if asking.poll() is None:
            asking.kill()
            asking.wait()
    assert asking.returncode == 0, err
    answer = json.loads(out)["reply"]
    assert (answer["kind"], answer["content"], answer["turn"]) == ("ANSWER", "use main", "t-1")


def test_u3_stranded_reply_survives_the_senders_gateway_being_down(lab: NetnsLab):
    main = register(lab, "hostA", "u3-main", role="main")
    worker = register(lab, "hostB", "u3-worker")
    wait_announced(lab, "hostA", worker)
    timed_out = lab.bridge("hostA", "send", worker, "slow task", "--from", "u3-main", "--wait", "1s", check=False)
    assert timed_out.returncode == ExitCode.TIMEOUT, timed_out.stderr
    msg = poll(lab, "hostB", worker)[0]
    lab.stop_gateway("hostA")  # A is gone entirely while B answers
    lab.bridge("hostB", "reply", msg["msgId"], "finally done", "--from", "u3-worker")
    lab.start_gateway("hostA")
    held = poll(lab, "hostA", main)
    assert [(m["kind"], m["content"], m["fromHost"]) for m in held] == [("REPLY", "finally done", "hostb")]
    assert poll(lab, "hostA", main, "0") == []


def test_u6_main_pair_and_u7_orchestrator(lab: NetnsLab):
    main_a = register(lab, "hostA", "u6-opus", role="main")
    main_b = register(lab, "hostB", "u6-cloud", role="main")
    orch = register(lab, "hostA", "u7-orch", role="orchestrator")
    wait_announced(lab, "hostA", main_b)
    wait_announced(lab, "hostB", main_a)
    lab.bridge("hostA", "send", main_b, "hello from opus", "--from", "u6-opus")
    m = poll(lab, "hostB", main_b)[0]
    lab.bridge("hostB", "reply", m["msgId"], "hello opus", "--from", "u6-cloud")
    assert poll(lab, "hostA", main_a)[0]["content"] == "hello opus"
    lab.bridge("hostA", "send", main_b, "status report please", "--from", "u7-orch")
    m = poll(lab, "hostB", main_b)[0]
    assert m["fromLabel"] == "u7-orch" and m["fromHost"] == "hosta"
    lab.bridge("hostB", "reply", m["msgId"], "3 tasks done", "--from", "u6-cloud")
    assert poll(lab, "hostA", orch)[0]["content"] == "3 tasks done"


def test_exec_worker_on_b_gets_the_authenticated_user(lab: NetnsLab):
    sink = lab.host("hostB").home.root / "exec-u1.jsonl"
    register(lab, "hostA", "ex-main", role="main")
    worker = register(lab, "hostB", "ex-script", deliver=exec_sink(sink))
    wait_announced(lab, "hostA", worker)
    lab.bridge("hostA", "send", worker, "run the job", "--from", "ex-main")
    body = wait_for(lambda: read_sink(sink), 30, what="exec delivery on hostB")[0]
    assert body["content"] == "run the job" and body["authenticatedUser"] == "guest"
    assert body["fromHost"] == "hosta"


def test_u5_roster_is_the_union_of_both_hosts(lab: NetnsLab):
    a = register(lab, "hostA", "u5-a")
    b = register(lab, "hostB", "u5-b")
    for host in ("hostA", "hostB"):
        entries = wait_for(
            lambda h=host: (r := roster_gids(lab, h)) and a in r and b in r and r,
            30,
            what=f"both entities in {host}'s roster",
        )
        assert entries[a]["host"] == "hosta" and entries[b]["host"] == "hostb"
    # a label known only through the roster resolves across hosts
    lab.bridge("hostA", "send", "u5-b", "found you by label", "--from", "u5-a")
    assert poll(lab, "hostB", b)[0]["content"] == "found you by label"


def test_u4_cross_host_spawn_then_u1_then_stop(lab: NetnsLab):
    host_b = lab.host("hostB")
    marker = host_b.home.root / "spawned.txt"
    host_b.home.config_file.parent.mkdir(parents=True, exist_ok=True)
    host_b.home.config_file.write_text(f"""
[profiles.nsworker]
launcher = "subprocess"
command = "echo \\"$BRIDGE_GID $BRIDGE_HOST_ID\\" > {marker}; echo READY; exec sleep 300"
ready_line = "^READY$"
""")
    lab.stop_gateway("hostB")  # profiles are read from the target's own config at start
    lab.start_gateway("hostB")
    main = register(lab, "hostA", "u4-main", role="main")
    wait_for(
        lambda: "hostb" in {g["host"] for g in lab.bridge_json("hostA", "roster")["gateways"]},
        30,
        what="hostB's gateway in hostA's roster",
    )
    handle = lab.bridge_json("hostA", "spawn", "nsworker", "--host", "hostb", "--label", "u4-rev", "--from", "u4-main")
    assert handle["host"] == "hostb" and handle["label"] == "u4-rev"
    # it really runs inside hostB's namespace, with the gid and host id it was given
    assert marker.read_text().split() == [handle["gid"], "hostb"]
    wait_announced(lab, "hostA", handle["gid"])
    lab.bridge("hostA", "send", "u4-rev", "first task", "--from", "u4-main")
    got = poll(lab, "hostB", handle["gid"])
    assert [(m["content"], m["fromHost"]) for m in got] == [("first task", "hosta")]
    stopped = lab.bridge_json("hostA", "stop", "u4-rev", "--from", main)
    assert stopped["process_stopped"] is True
    wait_for(lambda: handle["gid"] not in roster_gids(lab, "hostA"), 30, what="the stopped agent leaves the roster")
