"""The dashboard's ``GET /metrics``: a real ``bridge dashboard`` tapping a real broker, read
without the token (a scraper has none) by ``prometheus_client``'s parser and ``promtool``."""

from __future__ import annotations

import http.client
import shutil
import subprocess

from prometheus_client.parser import text_string_to_metric_families

from tests.support.chromium import wait_for


def _samples(board) -> dict[tuple[str, frozenset], float]:
    response = board.request("GET", "/metrics")  # no cookie, no token
    assert response.status == 200, response.body
    assert response.getheader("Content-Type").startswith("text/plain; version=")
    board.last_metrics = response.body.decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(board.last_metrics)
        for s in family.samples
    }


def _value(board, name: str, **labels: str) -> float:
    return _samples(board).get((name, frozenset(labels.items())), -1.0)


def test_metrics_count_the_stream_the_tap_and_the_collector(host_factory, dashboard_factory, vhost_uri):
    a = host_factory("dm", broker_uri=vhost_uri)
    a.register("worker")
    a.register("main", role="main")
    a.start_gateway()
    board = dashboard_factory(a)
    assert board.request("GET", "/metrics", {"Host": f"evil.example:{board.port}"}).status == 403  # rebinding
    assert board.request("GET", "/api/state").status == 403  # the rest still needs the token

    stream = http.client.HTTPConnection("127.0.0.1", board.port, timeout=10)
    stream.request("GET", "/api/events", headers={"Host": f"127.0.0.1:{board.port}", "Cookie": board.cookie})
    events = stream.getresponse()
    assert events.status == 200 and events.readline().startswith(b"retry:")
    wait_for(lambda: _value(board, "bridge_dashboard_stream_clients") == 1, 10, "one stream client")
    a.bridge("send", "main", "counted", "--from", "worker", check=True)
    wait_for(
        lambda: _value(board, "bridge_dashboard_messages_tapped_total", kind="SEND") >= 1, 10, "the tapped message"
    )
    got = _samples(board)
    assert got[("bridge_dashboard_stream_updates_total", frozenset({("part", "state")}))] >= 1
    assert got[("bridge_dashboard_broker_connected", frozenset())] == 1
    assert got[("bridge_dashboard_collections_total", frozenset())] >= 1, board.last_metrics
    assert got[("bridge_dashboard_collection_failures_total", frozenset())] == 0
    assert not any(name.endswith("_created") for name, _ in got)
    stream.close()
    wait_for(lambda: _value(board, "bridge_dashboard_stream_clients") == 0, 10, "the stream client gone")

    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: ./dev installs the Debian package prometheus"
    check = subprocess.run([promtool, "check", "metrics"], input=board.last_metrics, text=True, capture_output=True)
    assert check.returncode == 0 and not check.stdout.strip() and not check.stderr.strip(), check.stdout + check.stderr
