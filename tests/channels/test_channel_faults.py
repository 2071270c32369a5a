"""Channel fan-out through a crash: the members' gateway killed (SIGKILL) after committing a
burst of copies and before acking them. After the restart the broker redelivers those copies;
each member's copy id is derived from the message and the member, so every member ends with
every message exactly once (docs/channels.md)."""

from __future__ import annotations

import sys
import time

import pytest

from tests.support.hosts import Host

MEMBERS = ("crew1", "crew2", "crew3", "crew4")


def _drain(host: Host, label: str, expected: int, timeout: float = 90.0) -> list[dict]:
    got: list[dict] = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        got += host.bridge_json("poll", "--as", label, "--wait", "2s", "--limit", "10000")["messages"]
    got += host.bridge_json("poll", "--as", label, "--wait", "1s", "--limit", "10000")["messages"]
    return got


@pytest.mark.slow
def test_no_member_loses_or_doubles_a_copy_when_its_gateway_is_killed_mid_fan_out(host_factory):
    a, b = host_factory("fana"), host_factory("fanb")
    a.start_gateway()
    b.start_gateway()
    a.register("lead", role="main")
    for label in MEMBERS:
        b.register(label)
        b.bridge_json("channel", "join", "crew", "--as", label)
    b.stop_gateway()
    faulty = b.start_gateway(
        command=[sys.executable, "-m", "tests.support.faulty_gateway"], env={"BRIDGE_TEST_FAULT": "after-commit:2"}
    )
    sent: list[str] = []
    while faulty.poll() is None and len(sent) < 2000:
        lines = [f"m{len(sent) + i}" for i in range(50)]
        a.bridge_json("send", "#crew", "-", "--lines", "--from", "lead", input="\n".join(lines))
        sent += lines
        time.sleep(0.2)
    assert b.wait_gateway_exit(30) == -9, f"the fault never fired:\n{b.log()}"
    b.start_gateway()
    for label in MEMBERS:
        got = _drain(b, label, len(sent))
        assert sorted(m["content"] for m in got) == sorted(sent), label  # every one, exactly once
        assert len({m["copyOf"] for m in got}) == len(sent)
