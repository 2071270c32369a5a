"""The declared ``[plugins.opencode]`` and opencode-profile keys agree with what the backend
reads: values written with ``bridge config set`` load as written, and every declared
default is what the backend uses anyway."""

from __future__ import annotations

from bridgecli import config
from bridgecli_opencode.backend import OpenCodeSettings
from bridgecli_opencode.settings import PLUGIN_SETTINGS
from tests.support.env import run_bridge


def test_values_set_through_bridge_config_load_as_written(bridge_home) -> None:
    for key, value in [
        ("plugins.opencode.confirm_timeout", "3.5"),
        ("plugins.opencode.password_file", "/run/oc/password"),
        ("plugins.opencode.max_inline_bytes", "100"),
        ("profiles.oc.launcher", "opencode"),
        ("profiles.oc.opencode_tui", "true"),
        ("profiles.oc.tmux_session", "agents"),
    ]:
        proc = run_bridge("config", "set", key, value, env=bridge_home.env)
        assert proc.returncode == 0, proc.stderr
    cfg = config.load()
    loaded = OpenCodeSettings.load(cfg.plugin_settings("opencode"))
    assert (loaded.confirm_timeout, loaded.password_file, loaded.max_bytes) == (3.5, "/run/oc/password", 100)
    assert cfg.profiles()["oc"] == {"launcher": "opencode", "opencode_tui": True, "tmux_session": "agents"}
    for key, value, expected in [
        ("plugins.opencode.request_timeout", "-1", "expected a number of at least 0"),
        ("profiles.oc.opencode_tui", "maybe", "opencode_tui"),
    ]:
        proc = run_bridge("config", "set", "--", key, value, env=bridge_home.env)
        assert proc.returncode == 3 and expected in proc.stderr, proc.stderr


def test_declared_defaults_are_the_backends_defaults() -> None:
    declared = {s.key: s.default for s in PLUGIN_SETTINGS if s.default is not None}
    assert OpenCodeSettings.load(declared) == OpenCodeSettings.load({}) == OpenCodeSettings()
