"""Host failover with both executors attached: the broker host (`bridge browser serve`) is
killed, the guest agent wins the re-election, both browsers reconnect with their tabs, and
ownership is rebuilt from their `tabs` answers (groups start orphaned and are adopted)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess

import pytest

from bridgecli.browser.connect import GUEST, HOST, BrowserBridge
from bridgecli.browser.frames import CommandError
from tests.support.chromium import free_port, start_extension_browser, wait_for, wait_for_target
from tests.support.env import BRIDGE_BIN


@pytest.fixture
def serve_host(bridge_home):
    """`bridge browser serve` as the first host, in its own process (so it can be killed)."""
    port = free_port()
    env = dict(bridge_home.env, BRIDGE_BROWSER_TOKEN="test-token")
    proc = subprocess.Popen(
        [BRIDGE_BIN, "browser", "--port", str(port), "serve", "--label", "host"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )

    def listening() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, 15, "`bridge browser serve` to bind its port")
    yield port, proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    proc.stderr.close()


def test_host_failover_keeps_tabs_and_rebuilds_ownership(serve_host, chromium_factory, cdp_executors, page_server):
    port, host = serve_host
    agent = BrowserBridge(
        port, "test-token", label="agent-b", allow_host=True, failover=True, log=lambda text: print("agent-b:", text)
    )
    assert agent.start().mode == GUEST  # serve hosts; this agent joins it
    try:
        start_extension_browser(chromium_factory, port, "test-token", "work-chrome")
        cdp_browser = chromium_factory()
        cdp_executors(cdp_browser.endpoint, port, "test-token", "ci-chromium")
        wait_for_target(agent, "work-chrome")
        wait_for_target(agent, "ci-chromium")

        ext_tab = agent.send("open", "on-ext", {"url": page_server + "/form.html"}, target="work-chrome")["tab"]
        cdp_tab = agent.send("open", "on-cdp", {"url": page_server + "/form.html"}, target="ci-chromium")["tab"]
        agent.send("type", "on-ext", {"selector": "#name", "text": "Ext"})
        agent.send("type", "on-cdp", {"selector": "#name", "text": "Cdp"})

        os.killpg(host.pid, signal.SIGKILL)  # the host dies without saying goodbye
        assert agent.wait_mode(HOST, timeout=15) == HOST  # the guest won the re-bind

        def rebuilt() -> bool:
            groups = {t["label"]: t["groups"] for t in agent.send("targets")["targets"]}
            return groups == {"work-chrome": ["on-ext"], "ci-chromium": ["on-cdp"]}

        wait_for(rebuilt, 20, "both executors to reconnect and report their groups")
        owners = {g["group"]: g["owner"] for g in agent.send("tabs")["groups"]}
        assert owners == {"on-ext": "orphan", "on-cdp": "orphan"}

        # same tabs, same page state: the typed text is still there, and clicking works
        agent.send("click", "on-ext", {"selector": "#go"})
        agent.send("click", "on-cdp", {"selector": "#go"})
        assert agent.send("text", "on-ext", {"selector": "#out"})["text"] == "Hello, Ext"
        assert agent.send("text", "on-cdp", {"selector": "#out"})["text"] == "Hello, Cdp"
        assert agent.send("tabs", "on-ext")["groups"][0]["tabs"][0]["tab"] == ext_tab
        assert agent.send("tabs", "on-cdp")["groups"][0]["tabs"][0]["tab"] == cdp_tab
        owners = {g["group"]: g["owner"] for g in agent.send("tabs")["groups"]}
        assert owners == {"on-ext": "you", "on-cdp": "you"}  # adopted on first use

        late = BrowserBridge(port, "test-token", label="late", allow_host=False, failover=False).start()
        try:
            with pytest.raises(CommandError) as err:
                late.send("text", "on-ext")
            assert err.value.code == "not_owner"
        finally:
            late.close()
    finally:
        agent.close()
