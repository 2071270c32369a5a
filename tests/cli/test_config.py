"""`bridge config path|show|get|set|unset`: round trips, precedence and error messages."""

from __future__ import annotations

import json
import os
import tomllib

import pytest
from click.testing import CliRunner

from bridgecli.cli import root
from bridgecli.errors import ExitCode
from tests.support.env import run_bridge


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(root, list(args), env=env, catch_exceptions=False)


def test_path_honours_xdg_and_bridge_config(bridge_home):
    assert invoke("config", "path").output.strip() == str(bridge_home.config_file)
    other = bridge_home.root / "elsewhere.toml"
    assert invoke("config", "path", env={"BRIDGE_CONFIG": str(other)}).output.strip() == str(other)


def test_path_json(bridge_home):
    got = json.loads(invoke("config", "path", "--json").output)
    assert got == {"path": str(bridge_home.config_file), "exists": False}
    invoke("config", "set", "host.id", "h1")
    assert json.loads(invoke("config", "path", "--json").output)["exists"] is True


def test_set_get_unset_round_trip_keeps_other_keys_and_tables(bridge_home):
    cfg = bridge_home.config_file
    cfg.parent.mkdir(parents=True)
    cfg.write_text(
        '[host]\nid = "alpha"\n\n[profiles.worker]\nlauncher = "tmux"\n'
        'command = ["claude", "--x"]\nenv = { A = "1" }\n\n'
        '[plugins.herdr]\nsocket = "/tmp/h.sock"\n'
    )
    assert invoke("config", "set", "broker.uri", "amqp://u:p@h:5672/").exit_code == 0
    assert invoke("config", "set", "messaging.prefetch", "7").exit_code == 0
    data = tomllib.loads(cfg.read_text())
    assert data["broker"]["uri"] == "amqp://u:p@h:5672/"
    assert data["messaging"]["prefetch"] == 7  # stored typed, not as text
    assert data["host"]["id"] == "alpha"
    assert data["profiles"]["worker"] == {"launcher": "tmux", "command": ["claude", "--x"], "env": {"A": "1"}}
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


def _write_config(bridge_home, text: str):
    bridge_home.config_file.parent.mkdir(parents=True, exist_ok=True)
    bridge_home.config_file.write_text(text)
    return bridge_home.config_file


def test_an_unknown_key_in_the_file_can_be_seen_and_repaired(bridge_home):
    cfg = _write_config(bridge_home, '[broker]\nurl = "amqp://typo/"\nheartbeat = 10\n')
    # every command that needs the config fails, and the error says what to write instead
    proc = run_bridge("config", "get", "broker.heartbeat", env=bridge_home.env)
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1
    assert f"{cfg}: unknown key 'broker.url' — did you mean broker.uri?" in proc.stderr
    assert "`bridge config unset broker.url`" in proc.stderr
    # `config show` still works: it reports the unknown key and prints everything else
    proc = run_bridge("config", "show", env=bridge_home.env)
    assert proc.returncode == 0, proc.stderr
    assert "unknown key 'broker.url' ignored — did you mean broker.uri?" in proc.stderr
    assert any(line.split()[:2] == ["broker.heartbeat", "10"] for line in proc.stdout.splitlines())
    proc = run_bridge("config", "show", "--json", env=bridge_home.env)
    assert json.loads(proc.stdout)["unknown"] == ["broker.url"]
    # `config unset` removes the unknown key, and the file works again
    proc = run_bridge("config", "unset", "broker.url", env=bridge_home.env)
    assert proc.returncode == 0 and "broker.url removed" in proc.stderr
    assert tomllib.loads(cfg.read_text()) == {"broker": {"heartbeat": 10}}
    proc = run_bridge("config", "get", "broker.heartbeat", env=bridge_home.env)
    assert (proc.returncode, proc.stdout) == (0, "10\n")
    assert json.loads(run_bridge("config", "show", "--json", env=bridge_home.env).stdout)["unknown"] == []


def test_set_errors_name_the_file(bridge_home):
    cfg = bridge_home.config_file
    for args, expected in [
        (
            ("broker.url", "amqp://x/"),
            f"unknown configuration key 'broker.url', not written to {cfg} — did you mean broker.uri?",
        ),
        (("host.id", "Bad.Host"), f"bridge config set (not written to {cfg}): bad value 'Bad.Host'"),
    ]:
        proc = run_bridge("config", "set", *args, env=bridge_home.env)
        assert proc.returncode == 3 and expected in proc.stderr, proc.stderr
    _write_config(bridge_home, "[broker]\nnope = 1\n")
    proc = run_bridge("config", "set", "host.id", "ok", env=bridge_home.env)
    assert proc.returncode == 3 and f"{cfg}: unknown key 'broker.nope'" in proc.stderr


def _unwritable_config_path(tmp_path):
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        return locked / "bridge.toml"
    # root writes through permission bits; sysfs refuses new files even to root
    probe = "/sys/bridge-probe.toml"
    try:
        open(probe, "x").close()
    except OSError:
        return "/sys/bridge.toml"
    os.unlink(probe)
    pytest.skip("no directory here refuses writes")


def test_a_failed_write_is_one_line_with_its_own_exit_code(bridge_home, tmp_path):
    target = _unwritable_config_path(tmp_path)
    env = {**bridge_home.env, "BRIDGE_CONFIG": str(target)}
    for args in (("set", "host.id", "h1"), ("set", "browser.port", "4600")):
        proc = run_bridge("config", *args, env=env)
        assert proc.returncode == ExitCode.CANNOT_WRITE == 15
        assert proc.stderr.startswith(f"bridge: error: cannot write {target}: ")
        assert proc.stderr.count("\n") == 1 and "internal error" not in proc.stderr
        assert "nothing was changed" in proc.stderr


def test_a_failed_unset_write_goes_through_the_same_error(bridge_home, monkeypatch, capsys):
    from bridgecli import config_edit
    from bridgecli.cli import main

    _write_config(bridge_home, '[host]\nid = "h1"\n')
    monkeypatch.setattr(
        config_edit.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(30, "Read-only file system"))
    )
    with pytest.raises(SystemExit) as exited:
        main(["config", "unset", "host.id"])
    assert exited.value.code == ExitCode.CANNOT_WRITE
    err = capsys.readouterr().err
    assert err == (
        f"bridge: error: cannot write {bridge_home.config_file}: Read-only file system"
        " — nothing was changed; check that its directory exists, is writable and its "
        "disk is not full (or point BRIDGE_CONFIG at another file)\n"
    )
    assert tomllib.loads(bridge_home.config_file.read_text()) == {"host": {"id": "h1"}}
