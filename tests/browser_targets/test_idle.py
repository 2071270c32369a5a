"""An MV3 service worker is killed 30 s after its last WebSocket message; the extension's JSON
keepalive must hold one connection open through a long idle period."""

from __future__ import annotations

import time

import pytest

from tests.support.chromium import start_extension_browser, wait_for_target


@pytest.mark.slow
def test_extension_stays_connected_through_65_s_idle(host_bridge, chromium_factory, page_server):
    lines: list[str] = []
    bridge = host_bridge(log=lines.append)
    start_extension_browser(chromium_factory, bridge.port, "test-token", "idle-chrome")
    target = wait_for_target(bridge, "idle-chrome")
    bridge.send("open", "idle", {"url": page_server + "/form.html"})

    time.sleep(65)  # no commands at all: only keepalive frames may flow

    events = [line for line in lines if target["id"] in line]
    assert [line.rsplit(" ", 1)[1] for line in events] == ["connected"], events  # never dropped
    assert bridge.send("text", "idle", {"selector": "h1"})["text"] == "Greeter"
