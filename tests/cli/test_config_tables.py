"""`bridge config` on spawn profiles and plugin tables: keys checked against what the launcher
or plugin declares. Only built-in plugins are loaded, so the declarations are bridge's own
(third-party declarations: tests/test_plugins.py and the plugins' own tests)."""

from __future__ import annotations

import json
import tomllib

import pytest

from bridgecli import config
from tests.support.env import run_bridge


@pytest.fixture
def env(bridge_home):
    return {**bridge_home.env, "BRIDGE_LOAD_PLUGINS": ""}


def bridge(env, *args: str):
    return run_bridge("config", *args, env=env)


def test_a_profile_written_with_config_set_is_the_one_the_gateway_reads(bridge_home, env):
    for key, value in [
        ("profiles.dev.command", "claude --continue"),
        ("profiles.dev.cwd", "/srv/repo"),
        ("profiles.dev.env.ROLE", "reviewer"),
        ("profiles.dev.env.LANG", "C"),
        ("profiles.dev.ready_timeout", "60"),
        ("profiles.dev.ready_line", "^ready"),
        ("profiles.ci.command", '["make", "-C", "ci"]'),
        ("profiles.ci.role", "main"),
    ]:
        proc = bridge(env, "set", key, value)
        assert proc.returncode == 0, proc.stderr
    assert config.load().profiles() == {
        "dev": {
            "command": "claude --continue",
            "cwd": "/srv/repo",
            "env": {"ROLE": "reviewer", "LANG": "C"},
            "ready_timeout": 60.0,
            "ready_line": "^ready",
        },
        "ci": {"command": ["make", "-C", "ci"], "role": "main"},
    }
    got = json.loads(bridge(env, "get", "profiles.ci.command", "--json").stdout)
    assert got == {"key": "profiles.ci.command", "value": ["make", "-C", "ci"], "source": str(bridge_home.config_file)}
    assert bridge(env, "get", "profiles.dev.env").stdout == "ROLE=reviewer\nLANG=C\n"
    assert bridge(env, "get", "profiles.dev.ready_grace").stdout == "0.5\n"  # the declared default
    assert bridge(env, "get", "profiles.ci.launcher").stdout == "subprocess\n"

    shown = json.loads(bridge(env, "show", "--json").stdout)
    rows = {r["key"]: r for r in shown["settings"]}
    assert rows["profiles.dev.env.ROLE"]["value"] == "reviewer"
    assert rows["profiles.ci.command"]["source"] == str(bridge_home.config_file)
    assert shown["profiles"] == ["ci", "dev"] and shown["unknown"] == []
    human = bridge(env, "show").stdout.splitlines()
    assert any(line.split()[:2] == ["profiles.ci.command", '["make",'] for line in human)

    assert "profiles.dev.env.LANG removed" in bridge(env, "unset", "profiles.dev.env.LANG").stderr
    assert "profiles.ci removed" in bridge(env, "unset", "profiles.ci").stderr
    assert "was not set" in bridge(env, "unset", "profiles.ci.command").stderr
    assert config.load().profiles() == {
        "dev": {
            "command": "claude --continue",
            "cwd": "/srv/repo",
            "env": {"ROLE": "reviewer"},
            "ready_timeout": 60.0,
            "ready_line": "^ready",
        }
    }


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ("profiles.dev.comand", "x"),
            "profile 'dev' (launcher subprocess) has no key 'comand' — did you mean command? valid keys: launcher,",
        ),
        (("profiles.dev.ready_timeout", "soon"), "bad value 'soon' for profiles.dev.ready_timeout — expected a number"),
        (("profiles.dev.role", "boss"), "expected one of agent, main, orchestrator"),
        (("profiles.dev.label", "a/b"), "expected a label"),
        (("profiles.dev.ready_line", "(unclosed"), "expected a valid regular expression"),
        (("profiles.dev.env", "A=1"), "expected a table of strings: set one entry with profiles.dev.env.NAME"),
        (("profiles.dev.command.x", "y"), "profiles.dev.command has no entries"),
        (
            ("profiles.dev", "x"),
            "'profiles.dev' is not a key of a [profiles.NAME] table — name one key as profiles.NAME.KEY",
        ),
        (("profiles.dev.launcher", "tmux-typo"), "launcher 'tmux-typo' is not installed (installed: subprocess)"),
        (("plugins.tmux.socket", "/tmp/s"), "no installed plugin declares settings [plugins.tmux] (declared: none)"),
        (("plugins.tmux", "x"), "name one key as plugins.NAME.KEY"),
        (
            ("tmux.socket", "/tmp/s"),
            "Spawn profiles go under profiles.NAME.KEY (e.g. profiles.dev.command), "
            "plugin settings under plugins.NAME.KEY",
        ),
    ],
)
def test_a_bad_key_or_value_is_one_line_and_leaves_the_file(bridge_home, env, args, expected):
    assert bridge(env, "set", "profiles.dev.command", "claude").returncode == 0
    before = bridge_home.config_file.read_bytes()
    proc = bridge(env, "set", *args)
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1, proc.stderr
    assert expected in proc.stderr
    assert bridge_home.config_file.read_bytes() == before


def test_launcher_keys_follow_the_launcher(bridge_home, env):
    bridge_home.config_file.parent.mkdir(parents=True)
    bridge_home.config_file.write_text('[profiles.w]\nlauncher = "tmux"\ncommand = "c"\ntmux_split = "pane"\n')
    # the launcher's own keys need the launcher installed; the common ones do not
    proc = bridge(env, "set", "profiles.w.tmux_split", "window")
    assert proc.returncode == 3 and "launcher 'tmux' is not installed" in proc.stderr
    assert bridge(env, "set", "profiles.w.cwd", "/tmp").returncode == 0
    # switching launcher is refused while the profile has keys the new one does not take
    proc = bridge(env, "set", "profiles.w.launcher", "subprocess")
    assert proc.returncode == 3
    assert "launcher subprocess does not take key(s) tmux_split of profile 'w'" in proc.stderr
    assert "`bridge config unset profiles.w.KEY`" in proc.stderr
    assert bridge(env, "unset", "profiles.w.tmux_split").returncode == 0
    assert bridge(env, "set", "profiles.w.launcher", "subprocess").returncode == 0
    assert bridge(env, "set", "profiles.w.deliver", "exec:/bin/true").returncode == 0
    assert tomllib.loads(bridge_home.config_file.read_text())["profiles"]["w"] == {
        "launcher": "subprocess",
        "command": "c",
        "cwd": "/tmp",
        "deliver": "exec:/bin/true",
    }


def test_show_reports_table_keys_nobody_declares_and_unset_repairs_them(bridge_home, env):
    cfg = bridge_home.config_file
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[profiles.w]\ncommand = "c"\nready_pattern = "x"\nrole = "boss"\n[plugins.nope]\na = 1\n')
    proc = bridge(env, "show", "--json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["unknown"] == ["profiles.w.ready_pattern", "profiles.w.role", "plugins.nope"]
    assert "profiles.w.ready_pattern: profile 'w' (launcher subprocess) has no key 'ready_pattern'" in proc.stderr
    assert "bad value 'boss' for profiles.w.role" in proc.stderr
    assert "`bridge config unset plugins.nope`" in proc.stderr
    # a typo that is not in the file is an error, not "was not set"
    proc = bridge(env, "unset", "profiles.w.ready_patern")
    assert proc.returncode == 3 and "has no key 'ready_patern'" in proc.stderr
    for key in ("profiles.w.ready_pattern", "plugins.nope"):
        assert bridge(env, "unset", key).returncode == 0
    assert bridge(env, "set", "profiles.w.role", "main").returncode == 0
    assert tomllib.loads(cfg.read_text()) == {"profiles": {"w": {"command": "c", "role": "main"}}}
    assert json.loads(bridge(env, "show", "--json").stdout)["unknown"] == []
