"""The declared ``[plugins.tmux]`` and tmux-profile keys agree with what the backend and the
launcher read: values written with ``bridge config set`` load as written, and every
declared default is what the backend uses anyway."""

from __future__ import annotations

from bridgecli import config
from bridgecli_tmux.backend import TmuxSettings
from bridgecli_tmux.settings import PLUGIN_SETTINGS
from tests.support.env import run_bridge


def test_values_set_through_bridge_config_load_as_written(bridge_home):
    for key, value in [
        ("plugins.tmux.enter_delay", "0.3"),
        ("plugins.tmux.multiline", "line"),
        ("plugins.tmux.control_mode", "false"),
        ("plugins.tmux.max_inline_bytes", "100"),
        ("plugins.tmux.blocked_pattern", r'["^Allow\\?"]'),
        ("profiles.t.launcher", "tmux"),
        ("profiles.t.tmux_split", "pane"),
    ]:
        proc = run_bridge("config", "set", key, value, env=bridge_home.env)
        assert proc.returncode == 0, proc.stderr
    cfg = config.load()
    loaded = TmuxSettings.load(cfg.plugin_settings("tmux"), env={})
    assert (loaded.enter_delay, loaded.multiline, loaded.control_mode, loaded.max_bytes) == (0.3, "line", False, 100)
    assert [p.pattern for p in loaded.blocked_patterns] == [r"^Allow\?"]
    assert cfg.profiles()["t"] == {"launcher": "tmux", "tmux_split": "pane"}
    for key, value, expected in [
        ("plugins.tmux.shell_safe", "sometimes", "expected one of auto, always, never"),
        ("plugins.tmux.enter_delay", "-1", "expected a number of at least 0"),
        ("profiles.t.tmux_split", "diagonal", "expected one of window, pane"),
    ]:
        proc = run_bridge("config", "set", "--", key, value, env=bridge_home.env)
        assert proc.returncode == 3 and expected in proc.stderr, proc.stderr


def test_declared_defaults_are_the_backends_defaults():
    declared = {s.key: s.default for s in PLUGIN_SETTINGS if s.default is not None and s.key != "session"}
    assert TmuxSettings.load(declared, env={}) == TmuxSettings.load({}, env={})
