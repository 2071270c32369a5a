"""`bridge doctor` against a running broker, without one, and with unsafe files."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from bridgecli.cli import root
from tests.support.env import run_bridge


def _checks(stdout: str) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(stdout)["checks"]}


def test_healthy_broker_passes_with_capabilities(bridge_home, rabbitmq):
    env = {**bridge_home.env, "BRIDGE_BROKER_URI": rabbitmq.uri}
    result = run_bridge("doctor", "--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = _checks(result.stdout)
    assert checks["broker"]["status"] == "ok" and "RabbitMQ 3." in checks["broker"]["detail"]
    assert "guest:***@" in checks["broker"]["detail"]  # the password is never printed
    assert checks["quorum queues"]["status"] == "ok"
    assert checks["delay exchange"]["status"] == "ok" and "TTL" in checks["delay exchange"]["detail"]
    assert checks["consumer timeout"]["detail"].startswith("unknown")
    assert checks["gateway"]["status"] == "warn"


def test_human_output_in_process(bridge_home, rabbitmq, monkeypatch):
    monkeypatch.setenv("BRIDGE_BROKER_URI", rabbitmq.uri)
    result = CliRunner().invoke(root, ["doctor"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "ok    broker:" in result.output
    assert "WARN  gateway: not running" in result.output
    assert "fix: start it with `bridge gateway`" in result.output


def test_no_broker_configured_fails_with_the_fix(bridge_home):
    result = run_bridge("doctor", env=bridge_home.env)
    assert result.returncode == 4  # ExitCode.BROKER_UNAVAILABLE
    assert "FAIL  broker: no broker is configured" in result.stdout
    assert "bridge broker start" in result.stdout
    assert "1 failing check" in result.stderr


def test_unreachable_broker_fails(bridge_home):
    from bridgecli.localbroker import free_port

    env = {**bridge_home.env, "BRIDGE_BROKER_URI": f"amqp://guest:guest@127.0.0.1:{free_port()}/"}
    result = run_bridge("doctor", "--json", env=env)
    assert result.returncode == 4
    broker = _checks(result.stdout)["broker"]
    assert broker["status"] == "fail" and "cannot reach the AMQP broker" in broker["detail"]


def test_refused_credentials_are_named(bridge_home, rabbitmq):
    uri = rabbitmq.uri.replace("guest:guest@", "guest:wrong@")
    result = run_bridge("doctor", "--json", env={**bridge_home.env, "BRIDGE_BROKER_URI": uri})
    assert result.returncode == 4
    broker = _checks(result.stdout)["broker"]
    assert "refused the credentials" in broker["detail"] and "wrong" not in result.stdout


def test_invalid_config_fails_and_skips_the_broker(bridge_home):
    bridge_home.config_file.parent.mkdir(parents=True, exist_ok=True)
    bridge_home.config_file.write_text("[broker]\nurl = 'amqp://x/'\n")
    result = run_bridge("doctor", "--json", env=bridge_home.env)
    assert result.returncode == 3  # ExitCode.CONFIG
    checks = _checks(result.stdout)
    assert checks["config"]["status"] == "fail" and "broker.url" in checks["config"]["detail"]
    assert checks["broker"]["status"] == "skip"


def test_readable_secret_files_fail_with_chmod_fix(bridge_home, rabbitmq):
    env = {**bridge_home.env, "BRIDGE_BROKER_URI": rabbitmq.uri}
    cfg = bridge_home.config_file
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("[browser]\ntoken = 's3cret'\n")
    os.chmod(cfg, 0o644)
    token = bridge_home.root / "cache" / "opencode-browser" / "bridge.json"
    token.parent.mkdir(parents=True)
    token.write_text("{}")
    os.chmod(token, 0o640)
    result = run_bridge("doctor", "--json", env=env)
    assert result.returncode == 12  # ExitCode.PERMISSION
    checks = _checks(result.stdout)
    assert checks["config file permissions"]["fix"] == f"run `chmod 600 {cfg}`"
    assert checks["browser token file permissions"]["status"] == "fail"
    assert "s3cret" not in result.stdout
    os.chmod(cfg, 0o600)
    os.chmod(token, 0o600)
    assert run_bridge("doctor", env=env).returncode == 0


def test_a_running_gateway_is_reported(bridge_home, rabbitmq):
    import signal
    import subprocess
    import time

    from bridgecli import paths
    from tests.support.env import BRIDGE_BIN

    env = {**bridge_home.env, "BRIDGE_BROKER_URI": rabbitmq.uri, "BRIDGE_HOST_ID": "doc-host"}
    gateway = subprocess.Popen(
        [BRIDGE_BIN, "gateway"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            checks = _checks(run_bridge("doctor", "--json", env=env).stdout)
            if checks["gateway"]["status"] == "ok" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert checks["gateway"]["status"] == "ok", checks["gateway"]
        assert "host doc-host" in checks["gateway"]["detail"]
        assert str(paths.runtime_dir()) in checks["gateway"]["detail"]
    finally:
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.wait(timeout=20)
        except subprocess.TimeoutExpired:
            gateway.kill()
            gateway.wait()


def test_the_doctor_says_why_a_gateways_roster_view_is_stale():
    from bridgecli.doctor import OK, WARN, roster_freshness

    def row(host, age, synced=True, protocol=2):
        return {"host": host, "age": age, "synced": synced, "protocol": protocol}

    fresh = {"interval": 5.0, "local_host": "a", "hosts": [row("a", 1), row("b", 4), row("old", 3, protocol=1)]}
    assert roster_freshness(fresh).status == OK
    deaf = {**fresh, "hosts": [row("a", 30), row("b", 1)]}
    check = roster_freshness(deaf)
    assert check.status == WARN and "own heartbeat 30s ago" in check.detail and "listener" in check.detail
    behind = {**fresh, "hosts": [row("a", 1), row("b", 2, synced=False), row("c", 12)]}
    check = roster_freshness(behind)
    assert check.status == WARN and "missed frames of b" in check.detail and "c (12s)" in check.detail


def test_the_doctor_warns_of_a_silent_relay_and_of_a_large_fleet_heard_directly():
    from bridgecli.doctor import OK, WARN, roster_freshness

    rows = [{"host": h, "age": 1, "synced": True, "protocol": 2} for h in ("a", "b")]
    relay = {"feed": "relay r1", "relay": "r1", "epoch": "e", "age": 0.4, "interval": 1.0, "refused": {}}
    answer = {"interval": 5.0, "local_host": "a", "hosts": rows, "relay": relay}
    assert roster_freshness(answer).status == OK
    check = roster_freshness({**answer, "relay": {**relay, "age": 3.0}})
    assert check.status == WARN and "relay alone" in check.detail and "bridge relay" in check.fix
    many = [{"host": f"h{n}", "age": 1, "synced": True, "protocol": 2} for n in range(201)]
    direct = {**relay, "feed": "every host directly"}
    check = roster_freshness({**answer, "local_host": "h0", "hosts": many, "relay": direct})
    assert check.status == WARN and "201 hosts directly" in check.detail
    assert roster_freshness({**answer, "relay": direct}).status == OK
