"""Receipts between two hosts on one broker: the sender's host learns, without asking the
other host, that its message was delivered, read, or dead-lettered and why (docs/receipts.md).
Real gateways and ``bridge`` subprocesses; the hosts share nothing but the broker."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from bridgecli.errors import ExitCode
from tests.support.env import BRIDGE_BIN
from tests.support.hosts import Host


def _track(host: Host, msg_id: str, *args: str) -> dict:
    proc = host.bridge("track", msg_id, "--json", *args)
    assert proc.returncode in (0, ExitCode.TIMEOUT, ExitCode.DEAD_LETTERED), proc.stderr
    return json.loads(proc.stdout)


def _pair(host_factory) -> tuple[Host, Host]:
    a, b = host_factory("rcpta"), host_factory("rcptb")
    for host in (a, b):
        host.start_gateway()
    return a, b


def _announced(host: Host, gid: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        roster = host.bridge_json("roster")
        if any(e["gid"] == gid for e in roster["entries"]):
            return
        time.sleep(0.2)
    raise AssertionError(f"{gid} never announced to {host.name}")


@pytest.mark.slow
def test_held_is_delivered_then_read_only_after_the_poll(host_factory):
    a, b = _pair(host_factory)
    a.register("rc-main", role="main")
    worker = b.register("rc-worker")
    _announced(a, worker)
    sent = a.bridge_json("send", worker, "please review", "--from", "rc-main")
    delivered = _track(a, sent["msgId"], "--wait", "delivered", "--timeout", "20s")
    assert delivered["states"]["delivered"]["how"] == "held"
    assert "sent" in delivered["states"] and "read" not in delivered["states"]
    # not read until the worker pulls it: a short wait times out with exit 8
    early = a.bridge("track", sent["msgId"], "--wait", "read", "--timeout", "1s")
    assert early.returncode == ExitCode.TIMEOUT, early.stderr
    assert "was not read" in early.stderr
    got = b.bridge_json("poll", "--as", worker)
    assert [m["msgId"] for m in got["messages"]] == [sent["msgId"]]
    read = _track(a, sent["msgId"], "--wait", "read", "--timeout", "20s")
    assert read["states"]["read"]["how"] == "poll"
    # (the broker's confirm may come after the delivery on the other host: sent is not ordered)
    assert read["states"]["delivered"]["at"] <= read["states"]["read"]["at"]
    # the human form lists the states in order
    shown = a.bridge("track", sent["msgId"][:8]).stdout
    assert [line.split()[0] for line in shown.splitlines()[1:]] == ["sent", "delivered", "read"]
    # receipts are never shown to the sender as inbox messages
    assert a.bridge_json("poll", "--as", "rc-main")["messages"] == []
    # the record survives the sender's gateway restarting
    a.stop_gateway()
    a.start_gateway()
    assert _track(a, sent["msgId"])["states"] == read["states"]


@pytest.mark.slow
def test_a_pane_that_is_gone_ends_dead_lettered_at_the_sender(host_factory, tmp_path):
    sock = str(tmp_path / "tmux.sock")
    a = host_factory("rcpta")
    b = host_factory("rcptb", extra_env={"BRIDGE_TMUX_SOCKET": sock})
    subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-s", "keep"], check=True)
    try:
        subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-s", "agent"], check=True)
        pane = subprocess.run(
            ["tmux", "-S", sock, "display-message", "-p", "-t", "agent", "#{pane_id}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for host in (a, b):
            host.start_gateway()
        a.register("rc-asker", role="main")
        agent = b.register("rc-agent", deliver=f"tmux:{pane}")
        _announced(a, agent)
        subprocess.run(["tmux", "-S", sock, "kill-session", "-t", "agent"], check=True)  # the agent's pane is gone
        started = time.monotonic()
        proc = a.bridge("send", agent, "hello?", "--from", "rc-asker", "--wait", "120s", "--json")
        assert proc.returncode == ExitCode.DEAD_LETTERED, proc.stderr
        assert time.monotonic() - started < 120  # it ended with the reason, not at its timeout
        assert "was dead-lettered: delivery_failed" in proc.stderr
        msg_id = proc.stderr.split(" was dead-lettered")[0].split()[-1]
        record = _track(a, msg_id)
        assert record["states"]["dead-lettered"]["reason"].startswith("delivery_failed: ")
        assert pane in record["states"]["dead-lettered"]["reason"]
        assert "delivered" not in record["states"]
        tracked = a.bridge("track", msg_id, "--wait", "read")
        assert tracked.returncode == ExitCode.DEAD_LETTERED, tracked.stderr
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], check=False)


@pytest.mark.slow
def test_receipts_interleaved_with_inbox_bursts_keep_both_flowing(host_factory):
    """Each host receives messages and receipt frames at once: the receipts' acks never
    collide with a burst's one multiple ack (which once closed the consuming channel)."""
    a, b = _pair(host_factory)
    main = a.register("rc-main", role="main")
    worker = b.register("rc-worker")
    _announced(a, worker)
    _announced(b, main)
    rounds = 200
    lines = "".join(f"line {i}\n" for i in range(rounds))
    # both hosts send a burst at once: each receives inbox deliveries and receipt frames together
    senders = [
        subprocess.Popen(
            [BRIDGE_BIN, "send", "--lines", target, "-", "--from", label],
            env=host.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        for host, target, label in ((a, worker, "rc-main"), (b, main, "rc-worker"))
    ]
    for proc in senders:
        proc.communicate(lines, timeout=60)
        assert proc.returncode == 0
    for host, gid in ((a, main), (b, worker)):
        got: list[dict] = []
        deadline = time.monotonic() + 60
        while len(got) < rounds and time.monotonic() < deadline:
            got += host.bridge_json("poll", "--as", gid, "--wait", "5s", "--limit", "1000")["messages"]
        assert len(got) == rounds, f"{host.name} got {len(got)} of {rounds}"
        last = got[-1]["msgId"]
        sender = b if host is a else a
        assert _track(sender, last, "--wait", "read", "--timeout", "30s")["states"]["read"]["how"] == "poll"


@pytest.mark.slow
def test_the_hooks_activity_is_the_status_the_fleet_sees(host_factory):
    """``bridge hook`` (as Claude Code runs it) reports working, waiting for the user, idle;
    another host's roster shows each (waiting as ``blocked``), whatever the backend guesses."""
    a = host_factory("rcpta", extra_env={"BRIDGE_ROSTER_INTERVAL": "1"})
    b = host_factory("rcptb", extra_env={"BRIDGE_ROSTER_INTERVAL": "1"})
    for host in (a, b):
        host.start_gateway()
    agent = a.register("rc-hooked")
    _announced(b, agent)

    def hook(event: str, payload: dict) -> None:
        proc = a.bridge("hook", "claude-code", event, input=json.dumps(payload), env={"BRIDGE_GID": agent})
        assert proc.returncode == 0 and proc.stdout == ""

    def shown() -> str:
        return next(e["status"] for e in b.bridge_json("roster")["entries"] if e["gid"] == agent)

    def becomes(status: str) -> None:
        deadline = time.monotonic() + 30
        while shown() != status:
            assert time.monotonic() < deadline, f"roster still says {shown()!r}, not {status!r}"
            time.sleep(0.2)

    hook("prompt", {"hook_event_name": "UserPromptSubmit", "prompt": "go on"})
    becomes("working")
    hook("notify", {"hook_event_name": "Notification", "notification_type": "permission_prompt"})
    becomes("blocked")
    hook("stop", {"hook_event_name": "Stop"})
    becomes("idle")
