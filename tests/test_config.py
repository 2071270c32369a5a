"""The configuration model: schema parsing, layering and host ids (pure, no CLI)."""

from __future__ import annotations

import pytest

from bridgecli import config, config_edit
from bridgecli.config import SETTINGS, ConfigError
from bridgecli.errors import CannotWrite, ExitCode


def test_every_setting_has_help_and_a_valid_default():
    for key, setting in SETTINGS.items():
        assert setting.help and "." in key
        assert setting.env == "BRIDGE_" + key.replace(".", "_").upper()
        if setting.default is not None:
            assert setting.parse(setting.default, "default") == setting.default


def test_layering_env_over_file_over_default(bridge_home):
    bridge_home.config_file.parent.mkdir(parents=True)
    bridge_home.config_file.write_text("[roster]\ninterval = 2\n[broker]\nheartbeat = 10\n")
    cfg = config.load(env={"BRIDGE_BROKER_HEARTBEAT": "20"})
    assert cfg.get("roster.interval") == 2.0 and cfg.sources["roster.interval"] == str(bridge_home.config_file)
    assert cfg.get("broker.heartbeat") == 20 and cfg.sources["broker.heartbeat"] == "env BRIDGE_BROKER_HEARTBEAT"
    assert cfg.get("messaging.prefetch") == 250 and cfg.sources["messaging.prefetch"] == "default"
    flagged = config.load({"broker.heartbeat": "5", "host.id": None}, env={"BRIDGE_BROKER_HEARTBEAT": "20"})
    assert flagged.get("broker.heartbeat") == 5 and flagged.sources["broker.heartbeat"] == "flag"
    # an empty variable means "not set", so `BRIDGE_X= bridge …` does not error
    assert config.load(env={"BRIDGE_BROKER_HEARTBEAT": ""}).get("broker.heartbeat") == 10


def test_ocb_token_is_a_fallback_for_browser_token(bridge_home):
    assert config.load(env={"OCB_TOKEN": "t"}).get("browser.token") == "t"
    both = config.load(env={"OCB_TOKEN": "t", "BRIDGE_BROWSER_TOKEN": "b"})
    assert both.get("browser.token") == "b"


@pytest.mark.parametrize("raw, expected", [("true", True), ("0", False), ("yes", True), (True, True)])
def test_bool_parsing(raw, expected):
    setting = config.Setting("x.flag", bool, False, "a flag")
    assert setting.parse(raw, "t") is expected


@pytest.mark.parametrize(
    "key, raw, expectation",
    [
        ("broker.heartbeat", "1.5", "expected an integer"),
        ("broker.heartbeat", True, "expected an integer"),
        ("roster.interval", "-1", "expected a number greater than 0"),
        ("roster.interval", "x", "expected a number"),
        ("roster.expiry_missed", "0", "expected a number greater than 0"),
        ("roster.expiry_missed", "-2", "expected a number greater than 0"),
        ("host.id", "-lead", "expected a host id"),
        ("host.id", "a" * 64, "expected a host id"),
        ("broker.uri", "amqp://ok/, redis://no/", "expected an amqp://"),
        ("gateway.log_format", "xml", "expected one of human, json"),
        ("broker.tls_ca", ["a"], "expected a string"),
    ],
)
def test_bad_values_say_what_is_expected(key, raw, expectation):
    with pytest.raises(ConfigError) as err:
        SETTINGS[key].parse(raw, "somewhere.toml")
    assert f"somewhere.toml: bad value {raw!r} for {key}" in str(err.value)
    assert expectation in str(err.value)


def test_unknown_keys_and_malformed_sections(tmp_path):
    path = tmp_path / "b.toml"
    with pytest.raises(ConfigError, match="unknown key 'broker.nope'"):
        config.flatten({"broker": {"nope": 1}}, path)
    with pytest.raises(ConfigError, match="unknown key 'loose'"):
        config.flatten({"loose": 1}, path)
    with pytest.raises(ConfigError, match=r"\[profiles\] must hold tables"):
        config.flatten({"profiles": {"x": 1}}, path)
    flat, tables = config.flatten({"host": {"id": "h1"}, "profiles": {"w": {"command": "c"}}}, path)
    assert flat == {"host.id": "h1"} and tables == {"profiles": {"w": {"command": "c"}}}


def test_default_host_id_is_routing_safe(monkeypatch):
    for hostname, expected in [("My.Host.example", "my"), ("__", "host"), ("Büro-PC.lan", "b-ro-pc")]:
        monkeypatch.setattr(config.socket, "gethostname", lambda h=hostname: h)
        assert config.default_host_id() == expected
        assert config.HOST_ID_RE.match(config.default_host_id())


def test_split_uris():
    assert config.split_uris(" amqp://a/ ,, amqp://b/ ") == ["amqp://a/", "amqp://b/"]


def test_unknown_key_lookup_is_an_error(bridge_home):
    with pytest.raises(ConfigError, match="unknown configuration key"):
        config.load(env={}).get("nope")
    with pytest.raises(ConfigError):
        config_edit.unset_value("nope.key")


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(bridge_home, monkeypatch):
    config_edit.set_value("host.id", "before")
    original = bridge_home.config_file.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(config_edit.os, "replace", broken_replace)
    with pytest.raises(CannotWrite, match=f"cannot write {bridge_home.config_file}: disk full"):
        config_edit.set_value("host.id", "after")
    assert bridge_home.config_file.read_bytes() == original
    assert [p.name for p in bridge_home.config_file.parent.iterdir()] == ["bridge.toml"]


def test_a_directory_that_cannot_be_written_is_a_cannot_write_error(bridge_home, monkeypatch):
    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(config_edit.tempfile, "mkstemp", refused)
    with pytest.raises(CannotWrite, match="Permission denied") as err:
        config_edit.set_value("host.id", "x")
    assert err.value.exit_code == ExitCode.CANNOT_WRITE
    assert not bridge_home.config_file.exists()


@pytest.mark.parametrize(
    "key, hint",
    [
        ("broker.url", "did you mean broker.uri?"),
        ("messaging.prefech", "did you mean messaging.prefetch?"),
        # no near match: the valid keys of its section, else all of them and where tables live
        ("broker.x", "valid keys: broker.uri, broker.heartbeat, broker.tls_ca, broker.tls_cert, broker.tls_key."),
        (
            "zzz.q",
            "valid keys: " + ", ".join(SETTINGS) + ". Spawn profiles go under profiles.NAME.KEY "
            "(e.g. profiles.dev.command), plugin settings under plugins.NAME.KEY (e.g. plugins.tmux.socket).",
        ),
    ],
)
def test_unknown_key_hints_name_the_valid_keys(tmp_path, key, hint):
    section, name = key.split(".")
    with pytest.raises(ConfigError) as err:
        config.flatten({section: {name: 1}}, tmp_path / "b.toml")
    assert str(err.value) == (
        f"{tmp_path / 'b.toml'}: unknown key {key!r} — {hint} Fix it in the "
        f"file, or remove it with `bridge config unset {key}`"
    )


def test_load_can_collect_unknown_keys_instead_of_failing(bridge_home):
    bridge_home.config_file.parent.mkdir(parents=True)
    bridge_home.config_file.write_text('loose = 1\n[broker]\nurl = "x"\nheartbeat = 7\n')
    cfg = config.load(env={}, allow_unknown=True)
    assert cfg.unknown == ["loose", "broker.url"] and cfg.get("broker.heartbeat") == 7
    with pytest.raises(ConfigError, match="unknown key 'loose'"):
        config.load(env={})


def test_unset_removes_an_unknown_key_only_when_the_file_has_it(bridge_home):
    bridge_home.config_file.parent.mkdir(parents=True)
    bridge_home.config_file.write_text('loose = 1\n[broker]\nurl = "x"\n[profiles.w]\ncommand = "c"\n')
    assert config_edit.unset_value("broker.url") and config_edit.unset_value("loose")
    assert config.load(env={}).profiles() == {"w": {"command": "c"}}
    with pytest.raises(ConfigError, match="unknown configuration key 'broker.url', and not a key in"):
        config_edit.unset_value("broker.url")
    with pytest.raises(ConfigError):  # profiles are tables for an editor, not keys to unset
        config_edit.unset_value("profiles.w")
    assert config_edit.unset_value("host.id") is False


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("claude --x", "claude --x"),
        ('["claude", "--x"]', ["claude", "--x"]),
        ("[]", []),
        ("[Yy]es", "[Yy]es"),  # not a TOML array: a regex stays a string
        (["a"], ["a"]),
    ],
)
def test_list_settings_take_a_string_or_a_toml_array_of_strings(raw, expected):
    assert config.Setting("p.command", list, None, "a command").parse(raw, "t") == expected


@pytest.mark.parametrize(
    "setting, raw, expectation",
    [
        (
            config.Setting("p.command", list, None, "h"),
            "[1, 2]",
            'expected a string or a list of strings like ["a", "b"]',
        ),
        (config.Setting("p.env", dict, None, "h"), "A=1", "expected a table of strings: set one entry with p.env.NAME"),
        (config.Setting("p.env", dict, None, "h"), {"A": ["x"]}, "expected a table of strings"),
        (config.Setting("p.re", str, None, "h", check=config.regexes), "(x", "expected a valid regular expression"),
        (config.Setting("p.n", float, None, "h", check=config.non_negative), "-0.5", "expected a number of at least 0"),
    ],
)
def test_table_value_types_say_what_is_expected(setting, raw, expectation):
    with pytest.raises(ConfigError, match="bad value") as err:
        setting.parse(raw, "t")
    assert expectation in str(err.value)
