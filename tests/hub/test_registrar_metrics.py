"""The hub registrar's metrics (``hub.metrics``): real requests through
``Registrar.handle_body`` against a real HubStore and RabbitMQ node, counted by
``RegistrarMetrics`` and scraped once over HTTP from the shared ``MetricsServer``; the text
is read with ``prometheus_client``'s parser and checked by ``promtool``."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import sqlite3
import subprocess
import urllib.request
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridgecli import gids
from bridgecli.errors import ExitCode, MetricsAddressError
from bridgecli.hub import limits, registrar_metrics
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.invite import ENROL_USER_PREFIX
from bridgecli.hub.registrar import Registrar

T0 = 1_800_000_000.0
LOGGER = logging.getLogger("tests.registrar_metrics")


def _body(request: dict) -> bytes:
    return json.dumps(request).encode()


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_requests_grants_and_hosts_are_counted_and_served(tmp_path, admin):
    store = HubStore(tmp_path / "hub.db")
    metrics, server = registrar_metrics.start("0", LOGGER)  # loopback, any free port
    try:
        registrar = Registrar(
            store,
            admin,
            "hub-test",
            "hubhost",
            clock=lambda: T0,
            limiter=limits.RateLimiter(rate=0.001, burst=3),
            events=metrics,
        )
        host = f"m{uuid.uuid4().hex[:8]}"
        invite_id = uuid.uuid4().hex[:12]
        store.add_invite(invite_id, host, T0 + 3600, replace=False)
        enrol = {"op": "enrol", "host": host, "password": "p" * 32, "time": T0}
        assert registrar.handle_body(_body(enrol), ENROL_USER_PREFIX + invite_id)["ok"]
        own = [{"gid": gids.mint(host), "label": "a"}]
        assert registrar.handle_body(_body({"op": "claim", "entities": own}), host)["ok"]
        assert registrar.handle_body(_body({"op": "release", "gids": []}), host)["ok"]
        assert registrar.handle_body(b"not json", host)["kind"] == "invalid"  # the burst of 3 is spent
        assert registrar.handle_body(_body({"op": "release", "gids": []}), host)["kind"] == "rate_limited"
        assert registrar.handle_body(_body({"op": "claim", "entities": own}), "stranger")["kind"] == "denied"
        assert registrar.handle_body(_body({"op": "fly"}), "someone")["kind"] == "invalid"
        registrar.reconcile()
        store.close()  # the store breaks: handling raises, and serve would dead-letter the request
        with pytest.raises(sqlite3.ProgrammingError):
            registrar.handle_body(_body({"op": "claim", "entities": own}), "stranger2")

        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    finally:
        server.stop()
        store.close()
    got = _samples(text)

    def requests(kind: str, outcome: str) -> float:
        return got[("bridge_registrar_requests_total", frozenset({("kind", kind), ("outcome", outcome)}))]

    assert requests("enrol", "granted") == 1
    assert requests("claim", "granted") == 1 and requests("release", "granted") == 1
    assert requests("unknown", "refused") == 2  # the unparsable body and the unknown op
    assert requests("unknown", "rate_limited") == 1  # not parsed: its op is not known
    assert requests("claim", "refused") == 1
    assert requests("claim", "failed") == 1
    assert requests("enrol", "refused") == 0  # every kind and outcome is there from the start
    assert got[("bridge_registrar_hosts_enrolled_total", frozenset())] == 1
    assert got[("bridge_registrar_grants_applied_total", frozenset())] == 2  # the enrolment, the reconcile
    assert got[("bridge_registrar_hosts", frozenset())] == 1
    assert not any(name.endswith("_created") for name, _ in got)

    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: ./dev installs the Debian package prometheus"
    check = subprocess.run([promtool, "check", "metrics"], input=text, text=True, capture_output=True)
    assert check.returncode == 0 and not check.stdout.strip() and not check.stderr.strip(), check.stdout + check.stderr


@pytest.mark.parametrize("address", ["taken", "not-a-port"])
def test_a_bad_address_is_the_gateways_error(address):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        given = str(holder.getsockname()[1]) if address == "taken" else address
        with pytest.raises(MetricsAddressError) as refused:
            registrar_metrics.start(given, LOGGER)
    finally:
        holder.close()
    assert refused.value.exit_code == ExitCode.METRICS_ADDRESS and "PORT" in (refused.value.hint or "")
