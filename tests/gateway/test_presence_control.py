"""Presence roster (U5) and cross-host spawn/stop (U4) between real gateways."""

from __future__ import annotations

import json
import time

from bridgecli.errors import ExitCode

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


def test_roster_converges_and_expires_a_killed_gateway(host_factory):
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

    b.kill_gateway()  # no goodbye: entries must expire after 3 missed intervals
    killed = time.monotonic()
    _wait_until(lambda: _labels(_roster(a)) == [("alpha", a.name)], timeout=10)
    assert time.monotonic() - killed < 0.5 * 3 + 3
    b.start_gateway()
    _wait_until(lambda: _labels(_roster(a)) == want)


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
    main = a.register("main", role="main")
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
    main = a.register("main", role="main")
    a.start_gateway(), b.start_gateway()
    _wait_until(lambda: len(_roster(a)["gateways"]) >= 2)
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
