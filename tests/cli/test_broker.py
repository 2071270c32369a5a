"""`bridge broker start|status|logs|stop` as a user runs them: real subprocesses, real node."""

from __future__ import annotations

import json

import pika

from bridgecli import localbroker
from tests.support.env import run_bridge


def test_broker_lifecycle(bridge_home):
    env = bridge_home.env
    try:
        started = run_bridge("broker", "start", env=env)
        assert started.returncode == 0, started.stderr
        uri = started.stdout.strip()
        from urllib.parse import urlsplit

        parts = urlsplit(uri)
        assert parts.scheme == "amqp" and parts.hostname == "127.0.0.1"
        assert parts.username not in (None, "guest") and len(parts.password or "") >= 24, "no guest, a real secret"
        assert "started RabbitMQ node" in started.stderr
        pika.BlockingConnection(pika.URLParameters(uri)).close()

        again = run_bridge("broker", "start", "--json", env=env)
        assert again.returncode == 0
        assert json.loads(again.stdout)["already_running"] is True
        assert "already running" in again.stderr
        assert "broker.uri is set" not in again.stderr
        elsewhere = run_bridge("broker", "start", env={**env, "BRIDGE_BROKER_URI": "amqp://x/"})
        assert "broker.uri is set (env BRIDGE_BROKER_URI), so commands use that broker" in elsewhere.stderr

        status = json.loads(run_bridge("broker", "status", "--json", env=env).stdout)
        assert status["running"] and status["accepting"] and status["uri"] == uri
        state = json.loads((bridge_home.data_dir / "broker" / "state.json").read_text())
        assert state["uri"] == uri and state["pid"] == status["pid"]

        logs = run_bridge("broker", "logs", "-n", "5", "--json", env=env)
        assert logs.returncode == 0 and len(json.loads(logs.stdout)["lines"]) == 5

        # other commands pick the embedded broker up when no broker.uri is configured
        doctor = run_bridge("doctor", "--json", env=env)
        checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
        assert checks["broker"]["status"] == "ok"
        # only the embedded node lets doctor read consumer_timeout (through rabbitmqctl)
        assert checks["consumer timeout"]["detail"] == "1800000 ms (30 min)"
    finally:
        stopped = run_bridge("broker", "stop", env=env)
    assert stopped.returncode == 0 and "stopped RabbitMQ node" in stopped.stderr
    assert not localbroker.pid_alive(state["pid"])
    assert not localbroker.group_alive(state["pgid"])
    after = run_bridge("broker", "status", env=env)
    assert after.returncode == 0 and after.stdout.strip() == "stopped"
    assert "bridge broker start" in after.stderr
    second_stop = run_bridge("broker", "stop", env=env)
    assert second_stop.returncode == 0 and "not running" in second_stop.stderr


def test_start_without_rabbitmq_installed_says_how_to_install(bridge_home):
    env = {**bridge_home.env, "BRIDGE_RABBITMQ_BIN": "/nonexistent/rabbitmq"}
    result = run_bridge("broker", "start", env=env)
    assert result.returncode == 11  # ExitCode.MISSING_DEPENDENCY
    assert "apt-get install rabbitmq-server" in result.stderr
    assert result.stderr.count("\n") == 1  # one line, no traceback


def test_logs_before_any_start_is_not_found(bridge_home):
    result = run_bridge("broker", "logs", env=bridge_home.env)
    assert result.returncode == 6 and "bridge broker start" in result.stderr


def test_concurrent_starts_run_one_node(bridge_home):
    import subprocess

    from tests.support.env import BRIDGE_BIN

    env = bridge_home.env
    procs = [
        subprocess.Popen(
            [BRIDGE_BIN, "broker", "start", "--json"],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=180) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outputs
        results = [json.loads(out) for out, _ in outputs]
        assert sorted(r["already_running"] for r in results) == [False, True]
        assert results[0]["pid"] == results[1]["pid"]
    finally:
        run_bridge("broker", "stop", env=env)
    assert not localbroker.pid_alive(results[0]["pid"])
