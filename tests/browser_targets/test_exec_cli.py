"""`bridge browser launch|attach|extension-path` as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request

import pytest

from bridgecli.cli.browser_exec import extension_dir, extension_id
from bridgecli.errors import ExitCode
from tests.support.chromium import wait_for, wait_for_target
from tests.support.env import BRIDGE_BIN


def run(env: dict, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([BRIDGE_BIN, *args], env=env, capture_output=True, text=True, timeout=timeout)


def test_extension_path_prints_the_loadable_folder(bridge_home):
    done = run(bridge_home.env, "browser", "extension-path")
    assert done.returncode == 0 and done.stdout.strip() == str(extension_dir())
    assert (extension_dir() / "manifest.json").exists()
    data = json.loads(run(bridge_home.env, "browser", "extension-path", "--json").stdout)
    assert data == {"path": str(extension_dir()), "id": extension_id()}


def test_launch_serves_a_browser_until_sigterm_and_leaves_nothing_behind(host_bridge, bridge_home, page_server):
    bridge = host_bridge(token="test-token")  # hosting writes the token file launch reads
    proc = subprocess.Popen(
        [
            BRIDGE_BIN,
            "browser",
            "--port",
            str(bridge.port),
            "launch",
            "--headless",
            "--label",
            "cli-chromium",
            "--json",
        ],
        env=bridge_home.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        announced = json.loads(proc.stdout.readline())
        assert announced["kind"] == "cdp" and announced["label"] == "cli-chromium"
        target = wait_for_target(bridge, "cli-chromium")
        assert target["id"] == announced["id"] and target["kind"] == "cdp"
        bridge.send("open", "cli", {"url": page_server + "/other.html"})
        assert bridge.send("text", "cli", {"selector": "#para"})["text"] == "the other page"

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        with pytest.raises(OSError):  # Chromium went with it
            urllib.request.urlopen(announced["devtools"] + "/json/version", timeout=2)
        wait_for(lambda: not bridge.send("targets")["targets"], 10, "the executor to leave")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()


def test_launch_without_any_token_fails_fast_naming_the_fix(bridge_home):
    done = run(bridge_home.env, "browser", "launch", "--headless", "--label", "x")
    assert done.returncode == ExitCode.BROWSER
    assert "no browser-bridge token" in done.stderr
    assert "start the broker first with `bridge browser serve`" in done.stderr


def test_attach_serves_a_running_browser_until_sigterm_and_leaves_it_running(
    host_bridge, bridge_home, chromium_factory, page_server
):
    bridge = host_bridge(token="test-token")  # hosting writes the token file attach reads
    browser = chromium_factory()  # started by the user with --remote-debugging-port
    proc = subprocess.Popen(
        [
            BRIDGE_BIN,
            "browser",
            "--port",
            str(bridge.port),
            "attach",
            "--cdp",
            browser.endpoint,
            "--label",
            "my-chromium",
            "--json",
        ],
        env=bridge_home.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        announced = json.loads(proc.stdout.readline())
        assert announced["kind"] == "cdp" and announced["label"] == "my-chromium"
        wait_for_target(bridge, "my-chromium")
        listed = run(bridge_home.env, "browser", "--port", str(bridge.port), "targets", "--json")
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        assert [(r["label"], r["id"], r["kind"]) for r in rows] == [("my-chromium", announced["id"], "cdp")]

        bridge.send("open", "attached", {"url": page_server + "/other.html"})
        assert bridge.send("text", "attached", {"selector": "#para"})["text"] == "the other page"
        with urllib.request.urlopen(browser.endpoint + "/json/list", timeout=5) as reply:
            assert page_server + "/other.html" in [t["url"] for t in json.load(reply)]  # that browser

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        wait_for(lambda: not bridge.send("targets")["targets"], 10, "the executor to leave")
        assert browser.alive()  # attach never owned the browser: it keeps running, tabs and all
        with urllib.request.urlopen(browser.endpoint + "/json/list", timeout=5) as reply:
            assert page_server + "/other.html" in [t["url"] for t in json.load(reply)]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()


def test_attach_to_nothing_is_a_clear_error(bridge_home):
    env = dict(bridge_home.env, BRIDGE_BROWSER_TOKEN="t")
    done = run(env, "browser", "attach", "--cdp", "http://127.0.0.1:1", "--label", "x")
    assert done.returncode == ExitCode.BROWSER
    assert "no DevTools endpoint answers at http://127.0.0.1:1/json/version" in done.stderr
    assert "--remote-debugging-port" in done.stderr


def test_unknown_kind_lists_the_installed_ones(bridge_home):
    env = dict(bridge_home.env, BRIDGE_BROWSER_TOKEN="t")
    done = run(env, "browser", "launch", "--kind", "firefox", "--label", "x")
    assert done.returncode == ExitCode.NOT_FOUND
    assert "unknown browser target 'firefox' (installed: cdp)" in done.stderr


def test_launch_killed_with_sigkill_takes_its_chromium_along(host_bridge, bridge_home):
    """No finally block runs on SIGKILL; the browser must still not outlive its executor."""
    bridge = host_bridge(token="test-token")
    proc = subprocess.Popen(
        [BRIDGE_BIN, "browser", "--port", str(bridge.port), "launch", "--headless", "--label", "doomed", "--json"],
        env=bridge_home.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        announced = json.loads(proc.stdout.readline())
        proc.kill()
        proc.wait(10)

        def chromium_gone() -> bool:
            try:
                urllib.request.urlopen(announced["devtools"] + "/json/version", timeout=1)
                return False
            except OSError:
                return True

        wait_for(chromium_gone, 10, "Chromium to exit with its killed parent")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()


def test_launch_with_a_window_but_no_display_says_to_use_headless(host_bridge, bridge_home):
    bridge = host_bridge(token="test-token")
    env = {k: v for k, v in bridge_home.env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    done = subprocess.run(
        [BRIDGE_BIN, "browser", "--port", str(bridge.port), "launch", "--label", "w"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == ExitCode.BROWSER
    assert (
        "Chromium cannot open a window: no display ($DISPLAY unset) — pass --headless, or run "
        "it inside a desktop session"
    ) in done.stderr


def test_launch_before_the_broker_waits_for_it_and_says_so_once(bridge_home, page_server):
    """Start order does not matter: launched first, the executor retries quietly and joins the
    broker as soon as it is up."""
    import time

    from bridgecli.browser.connect import BrowserBridge
    from tests.support.chromium import free_port

    port = free_port()
    env = dict(bridge_home.env, BRIDGE_BROWSER_TOKEN="test-token")
    proc = subprocess.Popen(
        [BRIDGE_BIN, "browser", "--port", str(port), "launch", "--headless", "--label", "early", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    bridge = None
    try:
        time.sleep(4)  # several failed attempts
        bridge = BrowserBridge(port, "test-token", label="late-host").start()
        assert json.loads(proc.stdout.readline())["label"] == "early"
        assert wait_for_target(bridge, "early")["kind"] == "cdp"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        stderr = proc.stderr.read()
        assert stderr.count("no broker connection") == 1, stderr
        assert "start it with `bridge browser serve`" in stderr
    finally:
        if bridge is not None:
            bridge.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()


def test_a_rotated_token_is_picked_up_on_reconnect(host_bridge, bridge_home):
    """The host goes away and a new one starts with a rotated token (`bridge token rotate`):
    a launched executor re-reads the token file and joins it without a restart."""
    first = host_bridge(token="token-one")
    port = first.port
    proc = subprocess.Popen(
        [BRIDGE_BIN, "browser", "--port", str(port), "launch", "--headless", "--label", "rotating", "--json"],
        env=bridge_home.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        json.loads(proc.stdout.readline())
        first.close()
        second = host_bridge(port=port, token="token-two")  # writes the new token to the file
        assert wait_for_target(second, "rotating")["kind"] == "cdp"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        proc.stdout.close()
