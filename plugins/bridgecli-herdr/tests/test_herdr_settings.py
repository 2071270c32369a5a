"""The declared ``[plugins.herdr]`` keys agree with what the backend reads."""

from __future__ import annotations

from bridgecli import config
from bridgecli_herdr.backend import HerdrSettings
from bridgecli_herdr.settings import PLUGIN_SETTINGS
from tests.support.env import run_bridge


def test_values_set_through_bridge_config_load_as_written(bridge_home):
    for key, value in [
        ("plugins.herdr.method", "prompt"),
        ("plugins.herdr.confirm_timeout", "2"),
        ("profiles.h.launcher", "herdr"),
        ("profiles.h.herdr_direction", "down"),
    ]:
        proc = run_bridge("config", "set", key, value, env=bridge_home.env)
        assert proc.returncode == 0, proc.stderr
    loaded = HerdrSettings.load(config.load().plugin_settings("herdr"))
    assert (loaded.method, loaded.confirm_timeout) == ("prompt", 2.0)
    proc = run_bridge("config", "set", "profiles.h.herdr_direction", "left", env=bridge_home.env)
    assert proc.returncode == 3 and "expected one of right, down" in proc.stderr


def test_declared_defaults_are_the_backends_defaults():
    keys = {"blocked_wait", "confirm_timeout", "max_inline_bytes", "max_inline_lines", "method", "multiline"}
    declared = {s.key: s.default for s in PLUGIN_SETTINGS if s.key in keys}
    assert len(declared) == len(keys)
    assert HerdrSettings.load(declared) == HerdrSettings.load({})
