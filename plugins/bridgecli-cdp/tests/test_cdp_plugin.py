"""bridgecli-cdp is found like any third-party plugin: through its entry point."""

from __future__ import annotations

import subprocess

from bridgecli import config, plugins
from bridgecli.interfaces import BrowserTarget
from tests.support.env import BRIDGE_BIN


def test_cdp_registers_through_register_browser_targets(bridge_home):
    loaded = plugins.load()
    assert "register_browser_targets" in loaded.infos["cdp"].hooks
    assert loaded.infos["cdp"].provides == {"browser_targets": ["cdp"], "plugin_settings": ["cdp"]}
    target = loaded.provider("browser_targets", "cdp")(config.load())
    assert isinstance(target, BrowserTarget) and target.kind == "cdp"


def test_plugin_settings_reach_the_target(bridge_home):
    bridge_home.config_file.parent.mkdir(parents=True, exist_ok=True)
    bridge_home.config_file.write_text('[plugins.cdp]\nbinary = "/opt/chromium"\nargs = ["--lang=de"]\n')
    target = plugins.load().provider("browser_targets", "cdp")(config.load())
    assert target.settings == {"binary": "/opt/chromium", "args": ["--lang=de"]}


def test_disabling_third_party_plugins_removes_the_kind(bridge_home):
    env = dict(bridge_home.env, BRIDGE_LOAD_PLUGINS="", BRIDGE_BROWSER_TOKEN="t")
    done = subprocess.run(
        [BRIDGE_BIN, "browser", "launch", "--label", "x"], env=env, capture_output=True, text=True, timeout=30
    )
    assert "unknown browser target 'cdp' (installed: none)" in done.stderr


def test_a_configured_chromium_that_does_not_exist_is_named_in_the_error(bridge_home):
    env = dict(bridge_home.env, BRIDGE_BROWSER_TOKEN="t", BRIDGE_CHROMIUM="/nonexistent/chromium")
    done = subprocess.run(
        [BRIDGE_BIN, "browser", "launch", "--headless", "--label", "x"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 11  # ExitCode.MISSING_DEPENDENCY
    assert (
        "BRIDGE_CHROMIUM names /nonexistent/chromium, which is not an executable — fix the "
        "path or unset it to use the installed Chromium"
    ) in done.stderr


def test_settings_set_through_bridge_config_reach_the_target(bridge_home):
    from tests.support.env import run_bridge

    for key, value in [("plugins.cdp.binary", "/opt/chromium"), ("plugins.cdp.args", "--lang=de")]:
        proc = run_bridge("config", "set", "--", key, value, env=bridge_home.env)
        assert proc.returncode == 0, proc.stderr
    target = plugins.load().provider("browser_targets", "cdp")(config.load())
    # one flag given as plain text is stored as a one-element list, never iterated as characters
    assert target.settings == {"binary": "/opt/chromium", "args": ["--lang=de"]}
