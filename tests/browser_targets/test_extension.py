"""The shipped MV3 extension, loaded unpacked into real headless Chromium, as an executor."""

from __future__ import annotations

import base64
import json
import urllib.request

import pytest

from bridgecli.browser.frames import CommandError
from bridgecli.cli.browser_exec import extension_id
from tests.support.chromium import start_extension_browser, wait_for, wait_for_target


def devtools_targets(browser) -> list[dict]:
    with urllib.request.urlopen(browser.endpoint + "/json/list") as reply:
        return json.load(reply)


def test_extension_connects_takes_a_group_and_drives_a_page(host_bridge, chromium_factory, page_server):
    bridge = host_bridge()
    browser = start_extension_browser(chromium_factory, bridge.port, "test-token", "work-chrome")
    target = wait_for_target(bridge, "work-chrome")
    assert target["kind"] == "chrome" and target["id"].startswith("ext-")
    # the manifest key pins the id, so the broker sees the same Origin on every install
    workers = [t["url"] for t in devtools_targets(browser) if t["type"] == "service_worker"]
    assert f"chrome-extension://{extension_id()}/background.js" in workers

    opened = bridge.send("open", "research", {"url": page_server + "/form.html"})
    assert opened["title"] == "Form page" and isinstance(opened["tab"], int)
    bridge.send("type", "research", {"selector": "#name", "text": "Grace"})
    bridge.send("click", "research", {"selector": "#go"})
    assert bridge.send("text", "research", {"selector": "#out"})["text"] == "Hello, Grace"
    assert 'button "Greet" [#go]' in bridge.send("snapshot", "research")["snapshot"]
    png = base64.b64decode(bridge.send("screenshot", "research")["png"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000

    assert bridge.send("navigate", "research", {"url": page_server + "/slow.html"})["title"] == "Slow page"
    groups = bridge.send("tabs", "research")["groups"]
    assert groups == [
        {
            "group": "research",
            "tabs": [{"tab": opened["tab"], "url": page_server + "/slow.html", "title": "Slow page", "active": True}],
        }
    ]

    with pytest.raises(CommandError, match=r"no element matches #nope — check the selector"):
        bridge.send("click", "research", {"selector": "#nope"})
    with pytest.raises(
        CommandError, match=r'tab 999 is not in group "research" — list the group\'s tabs with the tabs action'
    ):
        bridge.send("text", "research", {"tab": 999})
    with pytest.raises(CommandError, match=r"navigation to http://127\.0\.0\.1:1/ failed: net::ERR_"):
        bridge.send("navigate", "research", {"url": "http://127.0.0.1:1/"})
    with pytest.raises(
        CommandError,
        match=r"/hang\.html did not finish loading within 1 s — retry, "
        r"or raise params\.timeout",
    ):
        bridge.send("navigate", "research", {"url": page_server + "/hang.html", "timeout": 1})

    bridge.send("close", "research")
    wait_for(lambda: wait_for_target(bridge, "work-chrome")["groups"] == [], 5, "group gone")
    assert not [t for t in devtools_targets(browser) if t["url"].startswith(page_server)]


def test_extension_groups_tabs_in_a_real_chrome_tab_group(host_bridge, chromium_factory, page_server):
    """Two tabs opened in one group share one Chrome tab group titled with the group name
    (read back through the service worker with CDP, as an independent oracle)."""
    from bridgecli_cdp.cdp import Cdp, browser_ws_url

    bridge = host_bridge()
    browser = start_extension_browser(chromium_factory, bridge.port, "test-token", "ext")
    wait_for_target(bridge, "ext")
    one = bridge.send("open", "team", {"url": page_server + "/form.html"})["tab"]
    two = bridge.send("open", "team", {"url": page_server + "/other.html"})["tab"]
    cdp = Cdp(browser_ws_url(browser.endpoint))
    try:
        worker = next(t for t in cdp.call("Target.getTargets")["targetInfos"] if t["type"] == "service_worker")
        session = cdp.call("Target.attachToTarget", {"targetId": worker["targetId"], "flatten": True})["sessionId"]
        probe = (
            "(async () => { const tabs = await chrome.tabs.query({});"
            " const groups = await chrome.tabGroups.query({});"
            " return JSON.stringify({tabs: tabs.map(t => [t.id, t.groupId]),"
            " groups: groups.map(g => [g.id, g.title])}); })()"
        )
        reply = cdp.call(
            "Runtime.evaluate", {"expression": probe, "awaitPromise": True, "returnByValue": True}, session=session
        )
    finally:
        cdp.close()
    state = json.loads(reply["result"]["value"])
    group_of = dict(map(tuple, state["tabs"]))
    assert group_of[one] == group_of[two] != -1
    assert [title for gid, title in state["groups"] if gid == group_of[one]] == ["team"]


class OptionsPage:
    """The extension's options page opened in a tab, driven over CDP as a user would."""

    def __init__(self, browser) -> None:
        from bridgecli_cdp.cdp import Cdp, browser_ws_url

        self.cdp = Cdp(browser_ws_url(browser.endpoint))
        target_id = self.cdp.call("Target.createTarget", {"url": f"chrome-extension://{extension_id()}/options.html"})[
            "targetId"
        ]
        self.session = self.cdp.call("Target.attachToTarget", {"targetId": target_id, "flatten": True})["sessionId"]

    def evaluate(self, expression: str):
        reply = self.cdp.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=self.session,
        )
        return reply["result"].get("value")

    def status(self) -> str:
        return self.evaluate("document.getElementById('status').textContent") or ""

    def close(self) -> None:
        self.cdp.close()


def test_a_wrong_token_shows_on_the_options_page(host_bridge, chromium_factory):
    bridge = host_bridge()
    browser = start_extension_browser(chromium_factory, bridge.port, "not-the-token", "wrong")
    page = OptionsPage(browser)
    try:
        wait_for(lambda: "token-refused" in page.status(), 15, "the refusal on the options page")
        assert "paste the current one from `bridge token show`" in page.status()
        assert bridge.send("targets")["targets"] == []
    finally:
        page.close()


def test_options_page_sets_token_and_label_by_hand(host_bridge, chromium_factory):
    """The human path: only the port is provisioned; the token and label are typed into the
    options page, and the executor id shown there is the one the broker sees."""
    bridge = host_bridge()
    from tests.support.chromium import EXTENSION_FLAGS, extension_copy

    ext = extension_copy({"port": bridge.port})
    browser = chromium_factory(
        extra_args=[f"--load-extension={ext}", f"--disable-extensions-except={ext}", *EXTENSION_FLAGS]
    )
    page = OptionsPage(browser)
    try:
        wait_for(lambda: "needs-token" in page.status(), 10, "the options page to say a token is needed")
        executor_id = wait_for(
            lambda: page.evaluate("document.getElementById('executor-id').textContent"), 5, "executor id"
        )
        assert page.evaluate("document.getElementById('port').disabled") is True  # provisioned
        page.evaluate(
            "document.getElementById('token').value = 'test-token';"
            "document.getElementById('label').value = 'by-hand';"
            "document.getElementById('save').click(); true"
        )
        target = wait_for_target(bridge, "by-hand")
        assert target["id"] == executor_id
        wait_for(lambda: "connected" in page.status(), 10, "the options page to show the connection")
    finally:
        page.close()


def test_same_document_navigation_ends_the_wait_without_a_load(host_bridge, chromium_factory, page_server):
    """A #hash navigation loads nothing. Its webNavigation event ends the load wait, so it
    returns at once even while the page still fetches an image (the tab stays "loading"
    until then: a wait on tab status alone ran into the timeout)."""

    bridge = host_bridge()
    start_extension_browser(chromium_factory, bridge.port, "test-token", "work-chrome")
    wait_for_target(bridge, "work-chrome")
    bridge.send("open", "g", {"url": page_server + "/other.html"})
    for url in ("/other.html#para", "/other.html#para", "/other.html#nowhere", "/other.html"):
        moved = bridge.send("navigate", "g", {"url": page_server + url, "timeout": 5})
        assert moved["url"] == page_server + url and moved["title"] == "Other page"

    with pytest.raises(CommandError, match=r"did not finish loading within 1 s"):
        bridge.send("navigate", "g", {"url": page_server + "/held.html", "timeout": 1})
    # the page's image is still on its way for ~2 s: a hash navigation that waited for the load
    # would fail with "did not finish loading within 1 s"
    moved = bridge.send("navigate", "g", {"url": page_server + "/held.html#section", "timeout": 1})
    assert moved["url"] == page_server + "/held.html#section" and moved["title"] == "Held page"
    assert bridge.send("text", "g", {"selector": "#section"})["text"] == "a section"
