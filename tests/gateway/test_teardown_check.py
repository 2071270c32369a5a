"""The host fixtures' teardown check catches a gateway that crashed or logged an error.

The hosts here are made by hand, not by ``host_factory``, so that the test can run the
fixture's own teardown step (``close_checked``) and see it fail."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.multihost.helpers import wait_for
from tests.support.env import BRIDGE_BIN
from tests.support.gateway_check import GatewayWatch, error_entries
from tests.support.hosts import Host, close_checked


@pytest.fixture
def bare_host(rabbitmq) -> Iterator[Host]:
    root = Path(tempfile.mkdtemp(prefix="htc", dir="/tmp"))
    host = Host(f"tc-{uuid.uuid4().hex[:6]}", root, rabbitmq.uri)
    yield host
    host.close()
    shutil.rmtree(root, ignore_errors=True)


def test_a_gateway_that_died_mid_test_fails_the_teardown(bare_host):
    bare_host.start_gateway()
    os.kill(bare_host.gateway.pid, signal.SIGKILL)  # a crash, not the test's kill_gateway()
    bare_host.gateway.wait(10)
    with pytest.raises(pytest.fail.Exception) as failed:
        close_checked([bare_host])
    message = str(failed.value)
    assert f"gateway of {bare_host.name} died mid-test (exit -9)" in message
    assert "connected to broker" in message.split("(tail) ---", 1)[1], "the log tail is shown"


def test_an_undeclared_error_line_fails_the_teardown(bare_host):
    """The real gateway with an injected commit failure: it lives, logs an error and requeues."""
    main = bare_host.register("main", role="main")
    bare_host.register("peer")
    bare_host.start_gateway(
        command=[sys.executable, "-m", "tests.support.faulty_gateway"],
        env={"BRIDGE_TEST_FAULT": "handoff-commit-fails:1"},
    )
    poll = subprocess.Popen(
        [BRIDGE_BIN, "poll", "--as", main, "--wait", "30s"],
        env=bare_host.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            lambda: any(e["gid"] == main and e["waiting"] for e in bare_host.bridge_json("status")["entities"]),
            what="the poll waiting in the gateway",
        )
        bare_host.bridge("send", main, "x", "--from", "peer", check=True)
        _, err = poll.communicate(timeout=40)
        assert poll.returncode == 0, err
    finally:
        if poll.poll() is None:
            poll.kill()
            poll.communicate(timeout=10)
    with pytest.raises(pytest.fail.Exception) as failed:
        close_checked([bare_host])
    message = str(failed.value)
    assert "logged an error" in message and "store commit failed; burst requeued" in message
    assert "died mid-test" not in message and "on SIGTERM" not in message, "it lived and stopped cleanly"
    assert "gateway stopped" in message.split("(tail) ---", 1)[1], "the tail is read after the stop"


def test_declared_errors_pass_and_stale_declarations_fail():
    log = (
        "12:00:00 info  connected to broker\n"
        "12:00:01 error store commit failed; burst requeued count=1\n"
        '{"ts": 1.0, "level": "critical", "event": "boom"}\n'
        '{"ts": 1.0, "level": "warning", "event": "broker connection lost"}\n'
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "ValueError: bad thing\n"
        "12:00:02 info  gateway stopped\n"
    )
    assert [e.splitlines()[-1] for e in error_entries(log)] == [
        "12:00:01 error store commit failed; burst requeued count=1",
        '{"ts": 1.0, "level": "critical", "event": "boom"}',
        "ValueError: bad thing",
    ]
    assert len(GatewayWatch("h").problems(None, lambda: log)) == 3, "each undeclared entry is a problem"
    watch = GatewayWatch("h")
    for pattern in ("store commit failed", '"boom"', "ValueError: bad thing", "never logged"):
        watch.expect_errors(pattern)
    assert watch.problems(None, lambda: log) == ["gateway of h: expected log error 'never logged' never logged"]


def test_a_lab_checks_each_stretch_of_its_gateways_logs_once(tmp_path):
    """A lab's gateways outlive a test: each check reads the logs written since the last one
    (across a restart's new log file) against the declarations made since."""
    first, second = tmp_path / "gateway-1.log", tmp_path / "gateway-2.log"
    first.write_text("12:00:00 error control request failed error=KeyError: 'x'\n")
    watch = GatewayWatch("lab")
    watch.expect_errors("control request failed")
    assert watch.check_stretch(None, [first], stop=False) is None
    with first.open("a") as log:
        log.write("12:00:01 info  gateway stopped\n")
    second.write_text("12:00:03 info  connected to broker\n12:00:04 error I/O")  # a line being written
    assert watch.check_stretch(None, [first, second], stop=False) is None, "an unfinished line waits"
    with second.open("a") as log:
        log.write(" task failed error=OSError\n")
    failure = watch.check_stretch(None, [first, second], stop=False)
    assert failure is not None and "logged an error" in failure and "I/O task failed" in failure
    assert "control request failed" not in failure.split("(tail) ---")[0], "an old stretch is not read again"
