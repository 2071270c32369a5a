"""A real ``bridge dashboard`` subprocess per test, as a simulated host runs it."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator

import pytest

from tests.support.env import BRIDGE_BIN

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


class Dashboard:
    """One running dashboard: ``url`` (with its token), ``port``, and raw HTTP helpers."""

    def __init__(self, host, *args: str) -> None:
        self.proc = subprocess.Popen(
            [BRIDGE_BIN, "dashboard", "--no-open", "--json", *args],
            env=host.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"bridge dashboard exited {self.proc.wait(10)}: {self.proc.stderr.read()}")
        info = json.loads(line)
        self.url, self.port = info["url"], info["port"]
        self.token = self.url.split("token=", 1)[1]
        self.cookie = f"bridge_dashboard_{self.port}={self.token}"

    def request(
        self, method: str, path: str, headers: dict[str, str] | None = None, body: bytes | None = None
    ) -> http.client.HTTPResponse:
        """One request with exactly ``headers`` (plus Host unless given)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        sent = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
        for name, value in sent.items():
            if value is not None:
                connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        # a live event stream never ends: leave its body unread
        streaming = response.getheader("Content-Type", "").startswith("text/event-stream")
        response.body = b"" if streaming else response.read()
        return response

    def get_json(self, path: str) -> dict:
        response = self.request("GET", path, {"Cookie": self.cookie})
        assert response.status == 200, response.body
        return json.loads(response.body)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def dashboard_factory() -> Iterator[Callable[..., Dashboard]]:
    """``start(host, *args) -> Dashboard``; every dashboard is stopped after the test."""
    started: list[Dashboard] = []

    def start(host, *args: str) -> Dashboard:
        dashboard = Dashboard(host, *args)
        started.append(dashboard)
        return dashboard

    yield start
    for dashboard in started:
        dashboard.stop()
