"""An MV3 service worker is killed 30 s after its last WebSocket message; the extension's JSON
keepalive must hold one connection open through a long idle period."""

from __future__ import annotations

import time

import pytest

from tests.support.chromium import start_extension_browser, wait_for, wait_for_target


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


@pytest.mark.slow
def test_a_killed_service_worker_comes_back_with_its_id_and_groups(host_bridge, chromium_factory, page_server):
    """Chrome may still stop the worker (update, memory pressure): the 30 s alarm restarts it,
    and it reconnects with the same executor id and its persisted groups."""
    from bridgecli_cdp.cdp import Cdp, browser_ws_url

    lines: list[str] = []
    bridge = host_bridge(log=lines.append)
    browser = start_extension_browser(chromium_factory, bridge.port, "test-token", "phoenix")
    before = wait_for_target(bridge, "phoenix")
    tab = bridge.send("open", "kept", {"url": page_server + "/form.html"})["tab"]

    cdp = Cdp(browser_ws_url(browser.endpoint))
    try:
        worker = next(t for t in cdp.call("Target.getTargets")["targetInfos"] if t["type"] == "service_worker")
        cdp.call("Target.closeTarget", {"targetId": worker["targetId"]})  # stop the worker
    finally:
        cdp.close()
    wait_for(lambda: not bridge.send("targets")["targets"], 10, "the worker's socket to drop")

    after = wait_for_target(bridge, "phoenix", timeout=45)  # the alarm fires within 30 s
    assert after["id"] == before["id"]
    wait_for(lambda: wait_for_target(bridge, "phoenix")["groups"] == ["kept"], 10, "groups rebuilt")
    assert bridge.send("text", "kept", {"selector": "h1"})["text"] == "Greeter"
    assert bridge.send("tabs", "kept")["groups"][0]["tabs"][0]["tab"] == tab
