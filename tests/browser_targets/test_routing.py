"""Two executors of different kinds behind one broker: --target routing, the ambiguous-label
error, and owner exclusivity between two agents."""

from __future__ import annotations

import pytest

from bridgecli.browser.connect import BrowserBridge
from bridgecli.browser.frames import CommandError
from tests.support.chromium import start_extension_browser, wait_for_target


@pytest.fixture
def two_browsers(host_bridge, chromium_factory, cdp_executors):
    bridge = host_bridge()
    start_extension_browser(chromium_factory, bridge.port, "test-token", "work-chrome")
    cdp_browser = chromium_factory()
    cdp_executors(cdp_browser.endpoint, bridge.port, "test-token", "ci-chromium")
    ext = wait_for_target(bridge, "work-chrome")
    cdp = wait_for_target(bridge, "ci-chromium")
    return bridge, ext, cdp, cdp_browser


def test_target_routes_new_groups_to_the_named_browser(two_browsers, page_server):
    bridge, ext, cdp, _ = two_browsers
    on_ext = bridge.send("open", "docs", {"url": page_server + "/form.html"}, target="work-chrome")
    on_cdp = bridge.send("open", "ci", {"url": page_server + "/other.html"}, target=cdp["id"])
    assert isinstance(on_ext["tab"], int) and isinstance(on_cdp["tab"], str)  # chrome vs CDP ids

    groups = {t["label"]: t["groups"] for t in bridge.send("targets")["targets"]}
    assert groups == {"work-chrome": ["docs"], "ci-chromium": ["ci"]}
    # later commands follow the group, not a target
    assert bridge.send("text", "docs", {"selector": "h1"})["text"] == "Greeter"
    assert bridge.send("text", "ci", {"selector": "#para"})["text"] == "the other page"
    listing = {g["group"]: g["label"] for g in bridge.send("tabs")["groups"]}
    assert listing == {"docs": "work-chrome", "ci": "ci-chromium"}

    # both executors read a page identically (one page.js), so agents need not care which runs it
    bridge.send("navigate", "ci", {"url": page_server + "/form.html"})
    for action in ("snapshot", "text"):
        assert bridge.send(action, "docs") == bridge.send(action, "ci")


def test_ambiguous_and_unknown_targets_are_errors_naming_the_candidates(two_browsers, chromium_factory, cdp_executors):
    bridge, ext, cdp, cdp_browser = two_browsers
    cdp_executors(cdp_browser.endpoint, bridge.port, "test-token", "work-chrome")  # same label
    wait_for_target(bridge, "work-chrome")
    import time

    deadline = time.monotonic() + 10
    while len(bridge.send("targets")["targets"]) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    with pytest.raises(CommandError) as err:
        bridge.send("open", "x", {"url": "about:blank"}, target="work-chrome")
    assert err.value.code == "ambiguous_target"
    assert ext["id"] in str(err.value)  # the candidates are listed, so the user can pick an id
    bridge.send("open", "x", {"url": "about:blank"}, target=ext["id"])  # an id always resolves

    with pytest.raises(CommandError) as err:
        bridge.send("open", "y", {"url": "about:blank"}, target="no-such-browser")
    assert err.value.code == "unknown_target"


def test_groups_are_owner_exclusive_between_agents(two_browsers, page_server):
    bridge, *_ = two_browsers
    bridge.send("open", "mine", {"url": page_server + "/form.html"}, target="work-chrome")
    other = BrowserBridge(bridge.port, "test-token", label="agent-2", allow_host=False, failover=False).start()
    try:
        with pytest.raises(CommandError) as err:
            other.send("click", "mine", {"selector": "#go"})
        assert err.value.code == "not_owner"
        assert str(err.value).startswith('group "mine" is owned by another client')
        # the owner is unaffected, and the page never saw the other agent's click
        assert bridge.send("text", "mine", {"selector": "#out"})["text"] == "nobody yet"

        other.send("open", "theirs", {"url": page_server + "/other.html"}, target="ci-chromium")
        with pytest.raises(CommandError) as err:
            bridge.send("close", "theirs")
        assert err.value.code == "not_owner"

        bridge.send("release", "mine")  # orphaned: the next agent to use it adopts it
        assert other.send("text", "mine", {"selector": "h1"})["text"] == "Greeter"
        with pytest.raises(CommandError):
            bridge.send("text", "mine")
    finally:
        other.close()


def test_a_browser_that_asks_to_be_default_gets_new_groups(host_bridge, chromium_factory, cdp_executors, page_server):
    """The extension connects first, but the CDP executor started with --default wins new
    groups opened without a target; the extension's own toggle (config `default`) works too."""
    bridge = host_bridge()
    start_extension_browser(chromium_factory, bridge.port, "test-token", "ext")
    wait_for_target(bridge, "ext")
    cdp_browser = chromium_factory()
    cdp_executors(cdp_browser.endpoint, bridge.port, "test-token", "cdp", default=True)
    assert wait_for_target(bridge, "cdp")["default"] is True
    bridge.send("open", "anywhere", {"url": page_server + "/other.html"})
    assert wait_for_target(bridge, "cdp")["groups"] == ["anywhere"]

    start_extension_browser(chromium_factory, bridge.port, "test-token", "ext-default", default=True)
    assert wait_for_target(bridge, "ext-default")["default"] is True
    bridge.send("open", "elsewhere", {"url": page_server + "/other.html"})
    assert wait_for_target(bridge, "ext-default")["groups"] == ["elsewhere"]


def test_the_user_story_from_the_shell(two_browsers, bridge_home, page_server, tmp_path):
    """`bridge browser open --target`, `do`, a screenshot to a file and an executor error,
    exactly as typed in a terminal (each command is a one-shot guest)."""
    import json
    import subprocess

    from tests.support.env import BRIDGE_BIN

    bridge, ext, cdp, _ = two_browsers
    env = dict(bridge_home.env, BRIDGE_BROWSER_TOKEN="test-token")

    def bridge_cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [BRIDGE_BIN, "browser", "--port", str(bridge.port), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    opened = bridge_cli("open", "shell", page_server + "/form.html", "--target", "ci-chromium", "--json")
    assert opened.returncode == 0, opened.stderr
    assert json.loads(opened.stdout)["title"] == "Form page"
    assert bridge_cli("do", "shell", "type", "selector=#name", "text=Lin").returncode == 0
    assert bridge_cli("do", "shell", "click", "selector=#go").returncode == 0
    text = bridge_cli("do", "shell", "text", "selector=#out", "--json")
    assert json.loads(text.stdout)["text"] == "Hello, Lin"
    shot = tmp_path / "shot.png"
    assert bridge_cli("do", "shell", "screenshot", "-o", str(shot)).returncode == 0
    assert shot.read_bytes().startswith(b"\x89PNG")
    assert wait_for_target(bridge, "ci-chromium")["groups"] == ["shell"]

    missing = bridge_cli("do", "shell", "click", "selector=#nope")
    assert missing.returncode == 14
    assert "no element matches #nope — check the selector with the snapshot action" in missing.stderr
