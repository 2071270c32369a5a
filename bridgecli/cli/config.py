"""``bridge config``: read and change ``bridge.toml``."""

from __future__ import annotations

import click

from bridgecli.cli import output


@click.group()
def config() -> None:
    """Show and change settings in bridge.toml.

    Precedence: command-line flag > BRIDGE_* environment variable > file > default. Every
    key's variable is BRIDGE_ plus the key in capitals with dots as underscores
    (broker.uri -> BRIDGE_BROKER_URI). Spawn profiles live in [profiles.NAME] tables
    (launcher, command, cwd, env, ready_timeout); plugin settings in [plugins.NAME].
    """


@config.command("path")
@output.json_option
def path_(as_json: bool) -> None:
    """Print the path of the configuration file."""
    from bridgecli import paths

    path = paths.config_file()
    if as_json:
        output.data({"path": str(path), "exists": path.exists()})
    else:
        output.line(str(path))


@config.command("show")
@output.json_option
@click.pass_obj
def show(app, as_json: bool) -> None:
    """Show every key with its effective value and where it comes from.

    Unknown keys in the file are reported on stderr (and under "unknown" with --json) and
    otherwise ignored, so this still works on the file it helps to repair; remove one with
    `bridge config unset KEY`.
    """
    from bridgecli import config as config_module
    from bridgecli.config import SETTINGS

    cfg = config_module.load(app.overrides, allow_unknown=True)
    for key in cfg.unknown:
        hint = config_module.unknown_key_hint(key)
        output.warn(f"{cfg.path}: unknown key {key!r} ignored — {hint} "
                    f"Remove it with `bridge config unset {key}`")
    rows = []
    for key, setting in SETTINGS.items():
        value = cfg.values[key]
        if setting.secret and value is not None:
            value = "********"
        elif key == "broker.uri" and value:
            from bridgecli.amqp.uri import redact

            value = redact(value)
        if key == "host.id" and value is None:
            value = cfg.host_id
        rows.append({"key": key, "value": value, "source": cfg.sources[key], "env": setting.env,
                     "help": setting.help})
    if as_json:
        output.data({"file": str(cfg.path), "settings": rows, "profiles": sorted(cfg.profiles()),
                     "unknown": cfg.unknown})
        return
    output.table(["KEY", "VALUE", "SOURCE"], [(r["key"], r["value"], r["source"]) for r in rows])
    if cfg.profiles():
        output.line("profiles: " + ", ".join(sorted(cfg.profiles())))


@config.command("get")
@click.argument("key")
@output.json_option
@click.pass_obj
def get(app, key: str, as_json: bool) -> None:
    """Print the effective value of KEY (empty line when unset)."""
    value = app.config.get(key)
    if key == "host.id" and value is None:
        value = app.config.host_id
    if as_json:
        output.data({"key": key, "value": value, "source": app.config.sources[key]})
    else:
        output.line("" if value is None else str(value))


@config.command("set")
@click.argument("key")
@click.argument("value")
def set_(key: str, value: str) -> None:
    """Store KEY = VALUE in the file (validated; other keys and sections are kept)."""
    from bridgecli import config as cfg

    stored = cfg.set_value(key, value)
    output.note(f"{key} = {stored!r} written to {cfg.paths.config_file()}")


@config.command("unset")
@click.argument("key")
def unset(key: str) -> None:
    """Remove KEY from the file so its default (or env) applies again.

    KEY may also be a key the file has but bridge does not know (a typo), to repair the file.
    """
    from bridgecli import config as cfg

    if cfg.unset_value(key):
        output.note(f"{key} removed from {cfg.paths.config_file()}")
    else:
        output.note(f"{key} was not set in {cfg.paths.config_file()}")
