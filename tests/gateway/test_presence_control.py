"""Presence roster (U5) and cross-host spawn/stop (U4) between real gateways."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time

from bridgecli import __version__
from bridgecli.errors import ExitCode
from bridgecli.gateway.client import GatewayClient
from tests.support.env import BRIDGE_BIN

FAST = {"BRIDGE_ROSTER_INTERVAL": "0.5"}


def _roster(host, *args):
    return host.bridge_json("roster", *args)


def _wait_until(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def _labels(result):
    return sorted((e["label"], e["host"]) for e in result["entries"])


def test_roster_converges_everywhere_and_without_a_gateway(host_factory):
    a, b = host_factory("a", extra_env=FAST), host_factory("b", extra_env=FAST)
    a.register("alpha", role="main")
    b.register("beta")
    b.register("gamma")
    a.start_gateway(), b.start_gateway()
    want = sorted([("alpha", a.name), ("beta", b.name), ("gamma", b.name)])
    _wait_until(lambda: all(_labels(_roster(h)) == want for h in (a, b)))
    entry = next(e for e in _roster(a)["entries"] if e["label"] == "beta")
    assert entry["role"] == "agent" and entry["status"] in ("idle", "unknown") and entry["backend"] == "hold"
    # a roster without a local gateway listens for one interval
    c = host_factory("c", extra_env=FAST)
    assert _labels(_roster(c)) == want
    assert _labels(_roster(a, "--host", b.name)) == [("beta", b.name), ("gamma", b.name)]
    # a frame whose body claims another host than its routing key is ignored (a host's user
    # may publish only roster.<its host>.* — docs/deploy.md), and so is one pushed into b's
    # roster queue by name; an honest one is taken
    import pika

    forged = {
        "v": 1,
        "type": "heartbeat",
        "host": b.name,
        "gid": "f" * 8 + "-0000-4000-8000-" + "0" * 12,
        "label": "forged",
        "role": "agent",
        "status": "idle",
        "backend": "hold",
        "since": 1.0,
        "version": "0",
        "interval": 0.5,
        "ts": time.time(),
    }
    honest = {**forged, "host": a.name, "gid": "e" * 8 + "-0000-4000-8000-" + "0" * 12, "label": "honest"}
    connection = pika.BlockingConnection(pika.URLParameters(a.env["BRIDGE_BROKER_URI"]))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        channel.basic_publish("bridge.roster", f"roster.{a.name}.{forged['gid']}", json.dumps(forged).encode())
        channel.basic_publish("", f"roster.{b.name}", json.dumps(forged).encode())
        # last, from the same channel into the same queue: b reads the frames in this order, so
        # once it shows the honest entry it has read (and ignored) both forged ones
        channel.basic_publish("bridge.roster", f"roster.{a.name}.{honest['gid']}", json.dumps(honest).encode())
    finally:
        connection.close()
    _wait_until(lambda: "honest" in {e["label"] for e in _socket_roster(b)["entries"]})
    assert "forged" not in {e["label"] for e in _socket_roster(b)["entries"]}


def _socket_roster(host):
    """The roster straight from the host's gateway socket: polling it costs milliseconds
    (a `bridge roster` subprocess costs a few hundred), so timings below are the view's own."""
    client = GatewayClient.connect(host.socket)
    assert client is not None, f"no gateway on {host.name}"
    with client:
        return client.call("roster")


def test_a_killed_gateways_entities_expire_after_three_missed_intervals(host_factory):
    interval, missed = 1.0, 3
    env = {"BRIDGE_ROSTER_INTERVAL": str(interval), "BRIDGE_ROSTER_EXPIRY_MISSED": str(missed)}
    a, b = host_factory("a", extra_env=env), host_factory("b", extra_env=env)
    a.register("alpha", role="main")
    beta = b.register("beta")
    a.start_gateway(), b.start_gateway()
    _wait_until(lambda: {e["label"] for e in _socket_roster(a)["entries"]} == {"alpha", "beta"})
    entry = next(e for e in _socket_roster(a)["entries"] if e["gid"] == beta)
    created = next(e["created"] for e in b.bridge_json("entities")["entities"] if e["gid"] == beta)
    assert entry["version"] == __version__ and entry["since"] == created

    before_kill = time.monotonic()
    b.kill_gateway()  # no goodbye: only missed heartbeats can remove beta
    after_kill = time.monotonic()
    while any(e["gid"] == beta for e in _socket_roster(a)["entries"]):
        assert time.monotonic() - before_kill < 10, "beta never expired"
        time.sleep(0.02)
    gone_at = time.monotonic()
    gone_after = gone_at - before_kill
    # beta's last heartbeat reached a at most one interval (plus a tick of lateness) before
    # the kill, and a drops it after 3 intervals of silence, checking every interval/2: so it
    # goes (missed - 1) to (missed + 0.5) intervals after the kill — never early (a live entity
    # is not dropped); how soon after that depends on the machine's load, which benchmarks
    # measure (bench/roster_scale.py), not tests
    assert (missed - 1) * interval - 0.4 <= gone_at - after_kill, f"expired {gone_after:.2f}s after the kill"
    b.start_gateway()  # and it returns after a restart
    _wait_until(lambda: any(e["gid"] == beta for e in _socket_roster(a)["entries"]))


def test_clean_stop_and_unregister_announce_gone_at_once(host_factory):
    a = host_factory("a", extra_env={"BRIDGE_ROSTER_INTERVAL": "30"})
    b = host_factory("b", extra_env={"BRIDGE_ROSTER_INTERVAL": "30"})
    a.register("alpha", role="main")
    b.register("beta")
    a.start_gateway(), b.start_gateway()
    _wait_until(lambda: len(_roster(a)["entries"]) == 2)
    b.bridge("unregister", "beta", check=True)
    _wait_until(lambda: _labels(_roster(a)) == [("alpha", a.name)], timeout=3)
    b.register("delta")
    _wait_until(lambda: len(_roster(a)["entries"]) == 2, timeout=3)
    b.stop_gateway()
    _wait_until(lambda: _labels(_roster(a)) == [("alpha", a.name)], timeout=3)


def test_labels_resolve_through_the_roster_ambiguity_lists_hosts(host_factory):
    a, b, c = (host_factory(n, extra_env=FAST) for n in ("a", "b", "c"))
    a.register("main", role="main")
    b.register("dup")
    c.register("dup")
    solo = b.register("solo")
    for h in (a, b, c):
        h.start_gateway()
    _wait_until(lambda: len(_roster(a)["entries"]) == 4)
    ok = a.bridge_json("send", "solo", "hi", "--from", "main")
    assert ok["to"] == solo
    amb = a.bridge("send", "dup", "hi", "--from", "main")
    assert amb.returncode == ExitCode.AMBIGUOUS
    assert b.name in amb.stderr and c.name in amb.stderr
    ghost = "0b0c3a5e-1111-4222-8333-444455556666"
    refused = a.bridge("send", ghost, "hi", "--from", "main")
    assert refused.returncode == ExitCode.NOT_FOUND and "--force" in refused.stderr


def test_spawn_round_trip_then_u1_then_stop(host_factory, tmp_path):
    a, b = host_factory("a", extra_env=FAST), host_factory("b", extra_env=FAST)
    marker = tmp_path / "env.txt"
    b.write_config(f"""
[profiles.echo]
launcher = "subprocess"
command = "echo \\"$BRIDGE_GID $ROLE_NAME\\" > {marker}; echo READY; exec sleep 300"
ready_line = "^READY$"
env = {{ ROLE_NAME = "reviewer" }}

[profiles.crash]
command = "echo boom >&2; exit 3"

[profiles.slow]
command = "sleep 300"
ready_line = "never"
""")
    a.register("main", role="main")
    a.start_gateway(), b.start_gateway()
    _wait_until(lambda: len(_roster(a)["gateways"]) >= 2)
    # b's heartbeat names b's profiles (what a TAB after `spawn --host b` offers), never their commands
    gateway_b = next(g for g in _roster(a)["gateways"] if g["host"] == b.name)
    assert gateway_b["profiles"] == ["crash", "echo", "slow"]
    handle = a.bridge_json("spawn", "echo", "--host", b.name, "--label", "rev1", "--from", "main")
    assert handle["host"] == b.name and handle["label"] == "rev1"
    assert marker.read_text().split() == [handle["gid"], "reviewer"]
    _wait_until(lambda: any(e["gid"] == handle["gid"] for e in _roster(a)["entries"]))
    # the new gid is reachable with U1
    a.bridge("send", "rev1", "first task", "--from", "main", check=True)
    got = b.bridge_json("poll", "--as", handle["gid"], "--wait", "5s")["messages"]
    assert [m["content"] for m in got] == ["first task"]
    assert "control spawn requested" in b.log_path.read_text() and "by=main" in b.log_path.read_text()

    stopped = a.bridge_json("stop", "rev1")
    assert stopped["process_stopped"] is True
    _wait_until(lambda: not any(e["gid"] == handle["gid"] for e in _roster(a)["entries"]))

    # errors reach the requester quickly and clearly
    start = time.monotonic()
    unknown_host = a.bridge("spawn", "echo", "--host", "nowhere")
    assert unknown_host.returncode == ExitCode.NOT_FOUND and "no live gateway" in unknown_host.stderr
    assert time.monotonic() - start < 5
    unknown_profile = a.bridge("spawn", "nope", "--host", b.name)
    assert unknown_profile.returncode == ExitCode.NOT_FOUND and "profiles: crash, echo, slow" in unknown_profile.stderr
    crash = a.bridge("spawn", "crash", "--host", b.name)
    assert crash.returncode != 0 and "boom" in crash.stderr
    slow = a.bridge("spawn", "slow", "--host", b.name, "--wait-ready", "1s")
    assert slow.returncode == ExitCode.TIMEOUT and "not ready" in slow.stderr


def test_spawn_refuses_a_path_label_and_reports_a_dead_process(host_factory, tmp_path):
    a, b = host_factory("a", extra_env=FAST), host_factory("b", extra_env=FAST)
    started = tmp_path / "started"
    b.write_config(f"""
[profiles.quiet]
command = "echo \\"$$ $BRIDGE_GATEWAY_SOCKET\\" > {tmp_path}/$BRIDGE_GID; touch {started}; exec sleep 300"

[profiles.slow]
command = "sleep 300"
ready_line = "never"
ready_timeout = 1
""")
    a.register("main", role="main")
    b.start_gateway()
    a.start_gateway()  # spawning at once: a waits until its roster has heard b (not "no live gateway")

    escape = a.bridge("spawn", "quiet", "--host", b.name, "--label", "x/../../../escaped", "--from", "main")
    assert escape.returncode == ExitCode.CONFIG and "bad label 'x/../../../escaped'" in escape.stderr
    assert not started.exists(), "the launcher ran for a refused label"
    assert not list(b.root.rglob("escaped")) and not list(b.root.rglob("spawn/*"))
    assert b.bridge_json("entities")["entities"] == []

    # no --wait-ready: the profile's ready_timeout (1 s) is the gate, not 30 s
    start = time.monotonic()
    slow = a.bridge("spawn", "slow", "--host", b.name)
    assert slow.returncode == ExitCode.TIMEOUT and "not ready within 1s" in slow.stderr
    assert time.monotonic() - start < 10

    # no ready_line: ready = still alive after the grace period
    handle = a.bridge_json("spawn", "quiet", "--host", b.name, "--label", "q1", "--from", "main")
    # the answer put the new gid in a's view: a send to it right away needs no --force
    a.bridge("send", handle["gid"], "first", "--from", "main", check=True)
    pid, socket_path = (tmp_path / handle["gid"]).read_text().split()
    assert socket_path == str(b.socket)
    assert [m["content"] for m in b.bridge_json("poll", "--as", handle["gid"], "--wait", "5s")["messages"]] == ["first"]

    os.kill(int(pid), signal.SIGKILL)  # the agent dies; its hold inbox alone would look idle
    _wait_until(
        lambda: any(e["gid"] == handle["gid"] and e["status"] == "gone" for e in _roster(a)["entries"]), timeout=10
    )


def test_requester_identity_travels_without_a_local_gateway(host_factory, tmp_path):
    b = host_factory("b", extra_env=FAST)
    c = host_factory("c", extra_env=FAST)  # no gateway on c: spawn/stop go straight to the broker
    b.write_config('[profiles.quiet]\ncommand = "exec sleep 300"\n')
    boss = c.register("boss", role="main")
    b.start_gateway()
    handle = c.bridge_json("spawn", "quiet", "--host", b.name, "--label", "w1", "--from", "boss")
    assert handle["label"] == "w1"
    c.bridge("stop", "w1", check=True, env={"BRIDGE_GID": boss})
    log = b.log_path.read_text()
    spawn_line = next(line for line in log.splitlines() if "control spawn requested" in line)
    stop_line = next(line for line in log.splitlines() if "control stop requested" in line)
    assert "by=boss" in spawn_line and f"from_host={c.name}" in spawn_line
    assert "by=boss" in stop_line and f"from_host={c.name}" in stop_line


def test_direct_send_resolves_through_the_roster(host_factory):
    a = host_factory("a", extra_env=FAST)
    c = host_factory("c", extra_env=FAST)  # neither c nor d runs a gateway
    d = host_factory("d", extra_env=FAST)
    alpha = a.register("alpha")
    c.register("me", role="main")
    quiet = d.register("quiet")  # its inbox exists, but no gateway announces it
    a.start_gateway()
    assert c.bridge_json("send", "alpha", "hi", "--from", "me")["to"] == alpha
    assert [m["content"] for m in a.bridge_json("poll", "--as", alpha, "--wait", "5s")["messages"]] == ["hi"]
    # a full gid needs no roster: the broker takes it into the inbox that exists...
    assert c.bridge_json("send", quiet, "hi", "--from", "me")["to"] == quiet
    # ...while a label of another host does need it
    unknown = c.bridge("send", "quiet", "hi", "--from", "me")
    assert unknown.returncode == ExitCode.NOT_FOUND, unknown.stderr


def _lines(proc, count, timeout=15.0):
    """Read ``count`` lines from a running process's stdout, failing after ``timeout``."""
    found: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [found.put(line) for line in proc.stdout], daemon=True).start()
    lines = []
    deadline = time.monotonic() + timeout
    while len(lines) < count:
        lines.append(found.get(timeout=max(0.1, deadline - time.monotonic())))
    return lines


def test_roster_watch_redraws_until_killed(host_factory):
    a = host_factory("a", extra_env=FAST)
    a.register("alpha")
    a.start_gateway()
    _wait_until(lambda: _roster(a)["entries"])
    for args, per_draw in ((["--json"], 1), ([], 2)):  # JSON: one document a line; table: header + row
        proc = subprocess.Popen(
            [BRIDGE_BIN, "roster", "--watch", *args],
            env=a.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        try:
            lines = _lines(proc, 2 * per_draw)
        finally:
            proc.kill()
            proc.wait(10)
        if args:
            docs = [json.loads(line) for line in lines]
            assert [[e["label"] for e in doc["entries"]] for doc in docs] == [["alpha"], ["alpha"]]
        else:
            assert [line.split()[0] for line in lines[:4]] == ["LABEL", "alpha", "LABEL", "alpha"]
