"""The CDP executor end to end: real headless Chromium, the real broker, a page on loopback."""

from __future__ import annotations

import base64

import pytest

from bridgecli.browser.frames import CommandError
from bridgecli.errors import BrowserError
from tests.support.chromium import wait_for, wait_for_target


@pytest.fixture
def cdp_setup(host_bridge, chromium_factory, cdp_executors):
    events: list[dict] = []  # what the owning agent hears from the executor
    bridge = host_bridge(on_event=events.append)
    browser = chromium_factory()
    executor = cdp_executors(browser.endpoint, bridge.port, "test-token", "cdp-a")
    wait_for_target(bridge, "cdp-a")
    return bridge, browser, executor, events


def test_agent_drives_a_page_through_the_cdp_executor(cdp_setup, page_server):
    bridge, *_ = cdp_setup
    opened = bridge.send("open", "research", {"url": page_server + "/form.html"})
    assert opened["url"] == page_server + "/form.html" and opened["title"] == "Form page"

    bridge.send("type", "research", {"selector": "#name", "text": "Ada"})
    bridge.send("click", "research", {"selector": "#go"})
    assert bridge.send("text", "research", {"selector": "#out"})["text"] == "Hello, Ada"
    snapshot = bridge.send("snapshot", "research")["snapshot"]
    assert 'button "Greet" [#go]' in snapshot and 'value="Ada"' in snapshot
    png = base64.b64decode(bridge.send("screenshot", "research")["png"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000

    moved = bridge.send("navigate", "research", {"url": page_server + "/slow.html"})
    assert moved["title"] == "Slow page"  # the load wait covered a 0.5 s response
    assert "slow done" in bridge.send("text", "research")["text"]

    tabs = bridge.send("tabs", "research")["groups"]
    assert [g["group"] for g in tabs] == ["research"]
    assert [t["tab"] for t in tabs[0]["tabs"]] == [opened["tab"]]
    assert [t["groups"] for t in bridge.send("targets")["targets"]] == [["research"]]

    bridge.send("close", "research")
    with pytest.raises(CommandError) as err:
        bridge.send("text", "research")
    assert err.value.code == "unknown_group"


def test_failures_are_one_line_errors_and_the_executor_keeps_serving(cdp_setup, page_server):
    bridge, *_ = cdp_setup
    bridge.send("open", "g", {"url": page_server + "/form.html"})
    with pytest.raises(CommandError, match=r"no element matches #missing — check the selector"):
        bridge.send("click", "g", {"selector": "#missing"})
    with pytest.raises(
        CommandError, match=r'tab nope is not in group "g" — list the group\'s tabs with the tabs action'
    ):
        bridge.send("text", "g", {"tab": "nope"})
    with pytest.raises(CommandError, match=r"is not a text field"):
        bridge.send("type", "g", {"selector": "#go", "text": "x"})
    assert bridge.send("text", "g", {"selector": "h1"})["text"] == "Greeter"
    with pytest.raises(CommandError, match=r"navigation to http://127\.0\.0\.1:1/ failed: net::"):
        bridge.send("navigate", "g", {"url": "http://127.0.0.1:1/"})
    with pytest.raises(
        CommandError,
        match=r"/hang\.html did not finish loading within 1 s — retry, "
        r"or raise params\.timeout",
    ):
        bridge.send("navigate", "g", {"url": page_server + "/hang.html", "timeout": 1})
    assert bridge.send("navigate", "g", {"url": page_server + "/other.html"})["title"] == "Other page"


def test_same_document_navigation_returns_without_a_load(cdp_setup, page_server):
    """Page.navigate to a #hash reports no loader id (nothing loads): the executor returns at
    once, also while the page still fetches an image, like the extension does."""

    bridge, *_ = cdp_setup
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


def test_two_tabs_in_one_group_and_tab_addressing(cdp_setup, page_server):
    bridge, *_ = cdp_setup
    first = bridge.send("open", "g", {"url": page_server + "/form.html"})["tab"]
    second = bridge.send("open", "g", {"url": page_server + "/other.html"})["tab"]
    assert bridge.send("text", "g", {"selector": "#para"})["text"] == "the other page"  # active = newest
    assert bridge.send("text", "g", {"selector": "h1", "tab": first})["text"] == "Greeter"
    bridge.send("close", "g", {"tab": second})
    tabs = bridge.send("tabs", "g")["groups"][0]["tabs"]
    assert [t["tab"] for t in tabs] == [first]


def test_user_closing_the_last_tab_makes_the_broker_forget_the_group(cdp_setup, page_server):
    bridge, browser, executor, events = cdp_setup
    tab = bridge.send("open", "g", {"url": page_server + "/other.html"})["tab"]
    import urllib.request

    urllib.request.urlopen(f"{browser.endpoint}/json/close/{tab}").read()  # the "user" closes it
    wait_for(
        lambda: bridge.send("targets")["targets"][0]["groups"] == [],
        10,
        f"group_closed (executor states {executor.states}, events {events})",
    )
    assert [(e["event"], e["group"]) for e in events] == [("tab_closed", "g"), ("group_closed", "g")]
    assert events[0]["data"] == {"tab": tab}


def test_restarted_executor_keeps_its_id_and_groups(host_bridge, chromium_factory, cdp_executors, page_server):
    bridge = host_bridge()
    browser = chromium_factory()
    first = cdp_executors(browser.endpoint, bridge.port, "test-token", "keeper")
    before = wait_for_target(bridge, "keeper")
    tab = bridge.send("open", "kept", {"url": page_server + "/form.html"})["tab"]
    first.stop()
    wait_for(lambda: not bridge.send("targets")["targets"], 10, "executor to leave")

    cdp_executors(browser.endpoint, bridge.port, "test-token", "keeper")
    after = wait_for_target(bridge, "keeper")
    assert after["id"] == before["id"]  # stable per label on this host
    wait_for(
        lambda: after["groups"] == ["kept"] or bridge.send("targets")["targets"][0]["groups"] == ["kept"],
        10,
        "rebuilt group",
    )
    assert bridge.send("text", "kept", {"selector": "h1"})["text"] == "Greeter"
    assert bridge.send("tabs", "kept")["groups"][0]["tabs"][0]["tab"] == tab


def test_wrong_token_is_reported_and_retried(host_bridge, chromium_factory, cdp_executors):
    bridge = host_bridge()
    browser = chromium_factory()
    executor = cdp_executors(browser.endpoint, bridge.port, "wrong-token", "bad")
    wait_for(lambda: any(s == "refused" for s, _ in executor.states), 10, "refusal")
    message = next(i["error"] for s, i in executor.states if s == "refused")
    assert message == ("the browser broker refused the token — run `bridge token show` and pass the current token")
    assert bridge.send("targets")["targets"] == []


def test_a_second_executor_with_the_same_id_replaces_the_first_which_stops(
    host_bridge, chromium_factory, cdp_executors
):
    """Two browsers under one id would evict each other forever; the evicted one stops with an
    error saying how to fix it."""
    bridge = host_bridge()
    browser = chromium_factory()
    first = cdp_executors(browser.endpoint, bridge.port, "test-token", "one", executor_id="same-id")
    wait_for_target(bridge, "one")
    cdp_executors(browser.endpoint, bridge.port, "test-token", "two", executor_id="same-id")
    first.thread.join(15)
    assert not first.thread.is_alive()
    assert str(first.error) == (
        "another executor with id same-id connected to the broker and "
        "replaced this one — give each browser its own --label (or --id)"
    )
    assert [t["label"] for t in bridge.send("targets")["targets"]] == ["two"]


def test_executor_stops_with_a_clear_error_when_its_browser_dies(host_bridge, chromium_factory, cdp_executors):
    bridge = host_bridge()
    browser = chromium_factory()
    executor = cdp_executors(browser.endpoint, bridge.port, "test-token", "mortal")
    wait_for_target(bridge, "mortal")
    browser.stop()  # the user quits Chromium
    executor.thread.join(15)
    assert not executor.thread.is_alive()
    assert str(executor.error) == (
        "the browser went away (Chromium exited or closed DevTools) — relaunch it with `bridge browser launch`"
    )
    wait_for(lambda: bridge.send("targets")["targets"] == [], 10, "the executor to leave the broker")


def test_tabs_answers_like_the_protocol_says(bridge_home, chromium_factory, page_server):
    """Straight to the executor's actions (the broker answers unknown groups itself)."""
    from bridgecli_cdp.actions import CdpActions
    from bridgecli_cdp.cdp import Cdp, browser_ws_url
    from bridgecli_cdp.registry import GroupRegistry

    cdp = Cdp(browser_ws_url(chromium_factory().endpoint))
    try:
        actions = CdpActions(cdp, GroupRegistry("direct"))
        assert actions.handle("tabs", "never-opened", {}) == {"groups": []}
        tab = actions.handle("open", "g", {"url": page_server + "/other.html"})["tab"]
        everything = actions.handle("tabs", None, {})
        assert everything == {
            "groups": [
                {
                    "group": "g",
                    "tabs": [{"tab": tab, "url": page_server + "/other.html", "title": "Other page", "active": True}],
                }
            ]
        }
        assert actions.handle("tabs", "g", {}) == everything
        with pytest.raises(BrowserError, match="unknown action 'fly' — use one of open, navigate"):
            actions.handle("fly", "g", {})
        with pytest.raises(BrowserError, match="click needs a group"):
            actions.handle("click", None, {"selector": "a"})
    finally:
        cdp.close()
