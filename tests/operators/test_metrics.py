"""``bridge gateway --metrics``: a live gateway's /metrics and /healthz, scraped over HTTP.

Real gateway subprocess, real broker, a hold inbox and an exec entity whose command fails;
the text is read with ``prometheus_client``'s own parser and checked by ``promtool``.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridgecli.nodeprocess import free_port
from tests.support.env import BRIDGE_BIN, run_bridge


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    """(sample name, its labels) -> value, read by prometheus_client's parser."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls)


def _until(what, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        found = what()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_counters_move_with_real_traffic_and_promtool_agrees(host_factory, tmp_path):
    port = free_port()
    a = host_factory("mx", extra_env={"BRIDGE_MESSAGING_MAX_ATTEMPTS": "2"})
    inbox = a.register("inbox")  # a hold inbox
    a.register("broken", deliver="exec:exit 3")
    a.start_gateway(env={"BRIDGE_GATEWAY_METRICS": str(port), "BRIDGE_GATEWAY_LOG_FORMAT": "json"})
    status, text = _get(port, "/metrics")
    assert status == 200
    before = _samples(text)
    assert _value(before, "bridge_gateway_info", host=a.env["BRIDGE_HOST_ID"]) == 1
    assert _value(before, "bridge_broker_connected") == 1

    msg_id = str(uuid.uuid4())
    a.bridge("send", "inbox", "one", "--from", "broken", "--id", msg_id, check=True)
    a.bridge("send", "inbox", "one again", "--from", "broken", "--id", msg_id, check=True)  # a repeat
    a.bridge("send", "inbox", "two", "--from", "broken", check=True)
    a.bridge("send", "broken", "fails", "--from", "inbox", check=True)

    def moved():
        now = _samples(_get(port, "/metrics")[1])
        done = (
            _value(now, "bridge_messages_delivered_total", backend="hold", kind="SEND") >= 2
            and _value(now, "bridge_messages_deduplicated_total", backend="hold") >= 1
            and _value(now, "bridge_messages_dead_lettered_total", backend="exec", reason="delivery_failed") >= 1
        )
        return now if done else None

    after = _until(moved)
    assert after, _get(port, "/metrics")[1]
    assert _value(after, "bridge_messages_sent_total", backend="exec", kind="SEND") == 3
    assert _value(after, "bridge_messages_sent_total", backend="hold", kind="SEND") == 1
    assert _value(after, "bridge_messages_delivered_total", backend="hold", kind="SEND") == 2
    assert _value(after, "bridge_messages_retried_total", backend="exec", kind="SEND") == 1
    assert _value(after, "bridge_delivery_latency_seconds_count", backend="hold") == 2
    assert _value(after, "bridge_messages_held") == 2 and _value(after, "bridge_held_oldest_age_seconds") >= 0
    assert _value(after, "bridge_entities") == 2 and _value(after, "bridge_inboxes_consumed") == 2
    assert _value(after, "bridge_api_requests_total", op="send") >= 4
    assert _until(lambda: _value(_samples(_get(port, "/metrics")[1]), "bridge_roster_entities") >= 2)
    a.bridge("send", "nobody-here", "hi", "--from", "inbox")  # an error answer of the local API
    errors = _samples(_get(port, "/metrics")[1])
    assert _value(errors, "bridge_api_errors_total") >= 1

    # the JSON log names things as the metrics' labels do: one object per line
    lines = [json.loads(line) for line in a.whole_log().splitlines() if line.startswith("{")]
    delivered = [line for line in lines if line["event"] == "delivered"]
    assert delivered and {"msg", "gid", "backend", "host", "kind"} <= set(delivered[0])
    assert delivered[0]["backend"] == "hold" and delivered[0]["host"] == a.env["BRIDGE_HOST_ID"]

    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: ./dev installs the Debian package prometheus"
    check = subprocess.run(
        [promtool, "check", "metrics"], input=_get(port, "/metrics")[1], text=True, capture_output=True
    )
    assert check.returncode == 0 and not check.stdout.strip() and not check.stderr.strip(), check.stdout + check.stderr
    assert inbox


def test_healthz_follows_the_broker_and_doctor_shares_its_checks(host_factory, rabbitmq):
    port = free_port()
    a = host_factory("hz")
    a.register("inbox")
    a.start_gateway(env={"BRIDGE_GATEWAY_METRICS": f"127.0.0.1:{port}"})
    status, body = _until(lambda: (lambda r: r if r[0] == 200 else None)(_get(port, "/healthz")))
    checks = {c["name"]: c["status"] for c in json.loads(body)["checks"]}
    assert checks == {"broker connection": "ok", "publish lane": "ok", "inboxes": "ok"}
    doctor = {c["name"]: c for c in json.loads(a.bridge("doctor", "--json").stdout)["checks"]}
    assert {name: doctor[name]["status"] for name in checks} == checks  # the same checks

    rabbitmq.stop()
    try:
        down = _until(lambda: (lambda r: r if r[0] == 503 else None)(_get(port, "/healthz")))
        assert down, "still healthy without a broker"
        verdict = json.loads(down[1])
        assert verdict["ok"] is False
        assert {c["name"]: c["status"] for c in verdict["checks"]}["broker connection"] == "warn"
    finally:
        rabbitmq.start()
    up = _until(lambda: (lambda r: r if r[0] == 200 else None)(_get(port, "/healthz")), timeout=90)
    assert up, _get(port, "/healthz")
    assert _value(_samples(_get(port, "/metrics")[1]), "bridge_broker_reconnects_total") >= 1


@pytest.mark.parametrize("address", ["taken", "not-a-port", "::1:80"])
def test_a_bad_metrics_address_stops_the_start_before_consuming(bridge_home, rabbitmq, address):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        given = str(holder.getsockname()[1]) if address == "taken" else address
        env = {**bridge_home.env, "BRIDGE_BROKER_URI": rabbitmq.uri}
        result = subprocess.run(
            [BRIDGE_BIN, "gateway", "--metrics", given],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    finally:
        holder.close()
    assert result.returncode == 24, result.stderr  # ExitCode.METRICS_ADDRESS
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "metrics" in lines[0] and "PORT" in lines[0], result.stderr
    assert "gateway started" not in result.stderr
    assert run_bridge("status", "--json", env=env).returncode == 5  # no gateway ever answered
