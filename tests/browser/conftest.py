"""Fixtures for the browser bridge: a free loopback port, an isolated token file, a running
broker (hosted in-process by a BrowserBridge) and fake executors connected to it."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from bridgecli.browser.connect import BrowserBridge
from tests.browser.fake_executor import FakeExecutor
from tests.support.env import bridge_home  # noqa: F401  (fixture re-export)

TOKEN = "test-token-0123456789abcdef"


def free_port() -> int:
    """A port nothing listens on right now (tests never assume 4517 is free)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """Point the token file at a private temp dir; no BRIDGE_*/OCB_* token leaks in."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in ("BRIDGE_BROWSER_TOKEN", "OCB_TOKEN", "BRIDGE_BROWSER_PORT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cache"


@pytest.fixture
def host(port, cache) -> Iterator[BrowserBridge]:
    bridge = BrowserBridge(port, TOKEN, label="host").start()
    assert bridge.mode == "host"
    yield bridge
    bridge.close()


@pytest.fixture
def executors(port) -> Iterator[list[FakeExecutor]]:
    """A list to append started fake executors to; all are stopped afterwards."""
    started: list[FakeExecutor] = []
    yield started
    for executor in started:
        executor.stop()


@pytest.fixture
def start_executor(port, executors):
    def start(id: str, **kwargs) -> FakeExecutor:
        executor = FakeExecutor(kwargs.pop("port", port), kwargs.pop("token", TOKEN), id=id, **kwargs).start()
        executors.append(executor)
        return executor

    return start


def eventually(check, timeout: float = 5.0, interval: float = 0.02):
    """Poll ``check()`` until it returns a truthy value (state settles in other threads);
    returns that value, or fails with the last one."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, f"condition never became true: {check}"
            return value
        time.sleep(interval)
