"""`bridge config path|show|get|set|unset`: round trips, precedence and error messages."""

from __future__ import annotations

import json
import os
import tomllib

from click.testing import CliRunner

from bridgecli.cli import root
from tests.support.env import run_bridge


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(root, list(args), env=env, catch_exceptions=False)


def test_path_honours_xdg_and_bridge_config(bridge_home):
    assert invoke("config", "path").output.strip() == str(bridge_home.config_file)
    other = bridge_home.root / "elsewhere.toml"
    assert invoke("config", "path", env={"BRIDGE_CONFIG": str(other)}).output.strip() == str(other)


def test_set_get_unset_round_trip_keeps_other_keys_and_tables(bridge_home):
    cfg = bridge_home.config_file
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[host]\nid = "alpha"\n\n[profiles.worker]\nlauncher = "tmux"\n'
                   'command = ["claude", "--x"]\nenv = { A = "1" }\n\n'
                   '[plugins.herdr]\nsocket = "/tmp/h.sock"\n')
    assert invoke("config", "set", "broker.uri", "amqp://u:p@h:5672/").exit_code == 0
    assert invoke("config", "set", "messaging.prefetch", "7").exit_code == 0
    data = tomllib.loads(cfg.read_text())
    assert data["broker"]["uri"] == "amqp://u:p@h:5672/"
    assert data["messaging"]["prefetch"] == 7  # stored typed, not as text
    assert data["host"]["id"] == "alpha"
    assert data["profiles"]["worker"] == {"launcher": "tmux", "command": ["claude", "--x"],
                                          "env": {"A": "1"}}
    assert data["plugins"]["herdr"] == {"socket": "/tmp/h.sock"}
    assert oct(os.stat(cfg).st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in cfg.parent.iterdir()) == ["bridge.toml"]  # no temp files left
    got = json.loads(invoke("config", "get", "messaging.prefetch", "--json").output)
    assert got == {"key": "messaging.prefetch", "value": 7, "source": str(cfg)}

    result = invoke("config", "unset", "broker.uri")
    assert "broker.uri removed" in result.output
    data = tomllib.loads(cfg.read_text())
    assert "broker" not in data and data["messaging"]["prefetch"] == 7
    assert "profiles" in data and "plugins" in data
    assert "was not set" in invoke("config", "unset", "broker.uri").output


def test_show_lists_keys_with_sources_and_hides_secrets(bridge_home):
    invoke("config", "set", "browser.token", "tok-secret")
    shown = json.loads(invoke("config", "show", "--json").output)
    rows = {r["key"]: r for r in shown["settings"]}
    assert rows["browser.token"]["value"] == "********"
    assert rows["broker.heartbeat"] == {**rows["broker.heartbeat"], "value": 30, "source": "default"}
    assert rows["host.id"]["value"]  # derived from the hostname when unset
    human = invoke("config", "show").output
    assert "tok-secret" not in human and "KEY" in human


def test_precedence_flag_over_env_over_file_over_default(bridge_home):
    env = dict(bridge_home.env)

    def effective(*flags: str, **extra: str):
        proc = run_bridge(*flags, "config", "get", "host.id", "--json", env={**env, **extra})
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout)
        return got["value"], got["source"]

    assert effective()[1] == "default"
    assert run_bridge("config", "set", "host.id", "from-file", env=env).returncode == 0
    assert effective() == ("from-file", str(bridge_home.config_file))
    assert effective(BRIDGE_HOST_ID="from-env") == ("from-env", "env BRIDGE_HOST_ID")
    assert effective("--host-id", "from-flag", BRIDGE_HOST_ID="from-env") == ("from-flag", "flag")


def test_unknown_key_errors_name_the_key(bridge_home):
    proc = run_bridge("config", "set", "broker.url", "amqp://x/", env=bridge_home.env)
    assert proc.returncode == 3
    assert "unknown configuration key 'broker.url'" in proc.stderr
    assert "bridge config show" in proc.stderr


def test_bad_value_names_source_key_and_expectation_and_leaves_the_file(bridge_home):
    run_bridge("config", "set", "host.id", "good", env=bridge_home.env)
    before = bridge_home.config_file.read_bytes()
    proc = run_bridge("config", "set", "host.id", "Bad.Host", env=bridge_home.env)
    assert proc.returncode == 3
    assert "bad value 'Bad.Host' for host.id" in proc.stderr and "expected a host id" in proc.stderr
    proc = run_bridge("config", "set", "messaging.inbox_queue_type", "lazy", env=bridge_home.env)
    assert "expected one of classic, quorum" in proc.stderr
    proc = run_bridge("config", "set", "broker.uri", "http://x/", env=bridge_home.env)
    assert "expected an amqp:// or amqps:// URI" in proc.stderr
    assert bridge_home.config_file.read_bytes() == before


def test_errors_in_the_file_name_the_file(bridge_home):
    cfg = bridge_home.config_file
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[broker]\nheartbeat = 'often'\n")
    proc = run_bridge("config", "show", env=bridge_home.env)
    assert proc.returncode == 3
    assert f"{cfg}: bad value 'often' for broker.heartbeat" in proc.stderr
    # an invalid file is never rewritten by `set`
    assert run_bridge("config", "set", "host.id", "x", env=bridge_home.env).returncode == 3
    assert cfg.read_text() == "[broker]\nheartbeat = 'often'\n"
    cfg.write_text("[broker\n")
    proc = run_bridge("config", "show", env=bridge_home.env)
    assert proc.returncode == 3 and "not valid TOML" in proc.stderr and str(cfg) in proc.stderr
