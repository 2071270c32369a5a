"""``bridge config``: read and change ``bridge.toml``."""

from __future__ import annotations

import click

from bridgecli.cli import output


@click.group()
def config() -> None:
    """Show and change settings in bridge.toml.

    Precedence: command-line flag > BRIDGE_* environment variable > file > default. Every
    key's variable is BRIDGE_ plus the key in capitals with dots as underscores
    (broker.uri -> BRIDGE_BROKER_URI). Spawn profiles live in [profiles.NAME] tables, set as
    profiles.NAME.KEY (agent, launcher, command, prompt_args, prompt, cwd, env.VAR, label, role,
    ready_timeout and the launcher's own keys); plugin settings in [plugins.NAME], set as
    plugins.NAME.KEY. Both are checked against what the launcher or plugin declares.
    """


def _declarations():
    from bridgecli import plugins
    from bridgecli.config_tables import Declarations

    return Declarations.from_plugins(plugins.get())


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

    Also lists every key of every spawn profile (profiles.NAME.KEY) and of every plugin's
    settings table (plugins.NAME.KEY, with the declared defaults). Unknown keys in the file
    (also profile or plugin keys nobody declares) are reported on stderr (and under
    "unknown" with --json) and otherwise ignored, so this still works on the file it helps
    to repair; remove one with `bridge config unset KEY`.
    """
    from bridgecli import config as config_module
    from bridgecli.config import SETTINGS

    cfg = config_module.load(app.overrides, allow_unknown=True)
    for key in cfg.unknown:
        hint = config_module.unknown_key_hint(key)
        output.warn(f"{cfg.path}: unknown key {key!r} ignored — {hint} Remove it with `bridge config unset {key}`")
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
        rows.append({"key": key, "value": value, "source": cfg.sources[key], "env": setting.env, "help": setting.help})
    table_rows, problems = _declarations().rows(cfg)
    for key, problem in problems:
        output.warn(f"{cfg.path}: {key}: {problem} (remove it with `bridge config unset {key}`)")
    rows += table_rows
    if as_json:
        output.data(
            {
                "file": str(cfg.path),
                "settings": rows,
                "profiles": sorted(cfg.profiles()),
                "unknown": cfg.unknown + [key for key, _ in problems],
            }
        )
        return
    output.table(["KEY", "VALUE", "SOURCE"], [(r["key"], _text(r["value"]), r["source"]) for r in rows])


def _text(value) -> str | None:
    """Lists as TOML writes them, so a shown value can be pasted back into `config set`."""
    if isinstance(value, list):
        import json

        return json.dumps(value, ensure_ascii=False)
    return value


@config.command("get")
@click.argument("key")
@output.json_option
@click.pass_obj
def get(app, key: str, as_json: bool) -> None:
    """Print the effective value of KEY (empty line when unset).

    KEY may be profiles.NAME.KEY or plugins.NAME.KEY (the declared default when unset).
    """
    from bridgecli.config_tables import is_table_key

    if is_table_key(key):
        value, source = _declarations().get_value(key, app.config)
    else:
        value, source = app.config.get(key), app.config.sources[key]
    if key == "host.id" and value is None:
        value = app.config.host_id
    if as_json:
        output.data({"key": key, "value": value, "source": source})
    elif isinstance(value, dict):
        for name, entry in value.items():
            output.line(f"{name}={entry}")
    else:
        output.line("" if value is None else str(_text(value)))


@config.command("set")
@click.argument("key")
@click.argument("value")
def set_(key: str, value: str) -> None:
    """Store KEY = VALUE in the file (validated; other keys and sections are kept).

    profiles.NAME.KEY and plugins.NAME.KEY are checked against the keys and types the
    launcher or plugin declares; set a profile's launcher before its launcher's own keys. A
    list is written as a TOML array: profiles.dev.command '["claude", "--continue"]'.
    """
    from bridgecli import config_edit, paths
    from bridgecli.config_tables import is_table_key

    stored = _declarations().set_value(key, value) if is_table_key(key) else config_edit.set_value(key, value)
    output.note(f"{key} = {stored!r} written to {paths.config_file()}")


@config.command("unset")
@click.argument("key")
def unset(key: str) -> None:
    """Remove KEY from the file so its default (or env) applies again.

    KEY may also be a key the file has but bridge does not know (a typo), to repair the file,
    or a whole profiles.NAME / plugins.NAME table.
    """
    from bridgecli import config_edit, paths
    from bridgecli.config_tables import is_table_key, unset_value

    if unset_value(key, _declarations()) if is_table_key(key) else config_edit.unset_value(key):
        output.note(f"{key} removed from {paths.config_file()}")
    else:
        output.note(f"{key} was not set in {paths.config_file()}")
