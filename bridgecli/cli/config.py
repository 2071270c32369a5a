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
    (launcher, command, cwd, env); plugin settings in [plugins.NAME].
    """


@config.command("path")
def path_() -> None:
    """Print the path of the configuration file."""
    from bridgecli import paths

    output.line(str(paths.config_file()))


@config.command("show")
@output.json_option
@click.pass_obj
def show(app, as_json: bool) -> None:
    """Show every key with its effective value and where it comes from."""
    from bridgecli.config import SETTINGS

    cfg = app.config
    rows = []
    for key, setting in SETTINGS.items():
        value = cfg.values[key]
        if setting.secret and value is not None:
            value = "********"
        if key == "host.id" and value is None:
            value = cfg.host_id
        rows.append({"key": key, "value": value, "source": cfg.sources[key], "env": setting.env,
                     "help": setting.help})
    if as_json:
        output.data({"file": str(cfg.path), "settings": rows, "profiles": sorted(cfg.profiles())})
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
    """Remove KEY from the file so its default (or env) applies again."""
    from bridgecli import config as cfg

    if cfg.unset_value(key):
        output.note(f"{key} removed from {cfg.paths.config_file()}")
    else:
        output.note(f"{key} was not set in {cfg.paths.config_file()}")
