"""The declared ``[plugins.codex]`` and codex-profile keys agree with what the backend and the
launcher read: values written with ``bridge config set`` load as written, bad ones are
refused, and every declared default is what the backend uses anyway."""

from __future__ import annotations

from bridgecli import config
from bridgecli_codex.backend import CodexSettings
from bridgecli_codex.settings import PLUGIN_SETTINGS
from tests.support.env import run_bridge


def test_values_set_through_bridge_config_load_as_written(bridge_home):
    for key, value in [
        ("plugins.codex.timeout", "2.5"),
        ("plugins.codex.confirm_timeout", "4"),
        ("plugins.codex.max_inline_lines", "20"),
        ("profiles.c.launcher", "codex"),
        ("profiles.c.codex_tui", "tmux"),
        ("profiles.c.codex_tui_session", "agents"),
    ]:
        proc = run_bridge("config", "set", key, value, env=bridge_home.env)
        assert proc.returncode == 0, proc.stderr
    cfg = config.load()
    loaded = CodexSettings.load(cfg.plugin_settings("codex"))
    assert (loaded.timeout, loaded.confirm_timeout, loaded.max_lines) == (2.5, 4.0, 20)
    assert cfg.profiles()["c"] == {"launcher": "codex", "codex_tui": "tmux", "codex_tui_session": "agents"}
    for key, value, expected in [
        ("plugins.codex.timeout", "-1", "expected a number of at least 0"),
        ("profiles.c.codex_tui", "window", "expected one of none, tmux"),
    ]:
        proc = run_bridge("config", "set", "--", key, value, env=bridge_home.env)
        assert proc.returncode == 3 and expected in proc.stderr, proc.stderr


def test_declared_defaults_are_the_backends_defaults():
    declared = {s.key: s.default for s in PLUGIN_SETTINGS if s.default is not None}
    assert CodexSettings.load(declared) == CodexSettings.load({}) == CodexSettings()
