"""The one lazy click group: subcommands are listed from a table and imported on first use.

Used by the root group (built-ins plus plugin commands) and by ``bridge browser``, so that
``--help`` and TAB list commands without importing their modules (flask/click's lazy pattern).
"""

from __future__ import annotations

import importlib
from typing import Protocol

import click

from bridgecli.errors import BridgeError

#: (``"module:attribute"``, short help, plugin name or None for bridge's own commands)
Entry = tuple[str, str, "str | None"]


class CommandTable(Protocol):
    """Where a :class:`LazyGroup` finds its subcommands."""

    def entries(self) -> dict[str, Entry]:
        """Every subcommand by name."""

    def entry(self, name: str) -> Entry | None:
        """One subcommand (may be cheaper than :meth:`entries`)."""

    def report_failures(self) -> None:
        """Print what went wrong while building the table (e.g. broken plugins) on stderr."""


class StaticTable:
    """A fixed table of bridge's own commands: ``name -> ("module:attribute", short help)``."""

    def __init__(self, commands: dict[str, tuple[str, str]]) -> None:
        self._entries: dict[str, Entry] = {name: (target, help_, None) for name, (target, help_) in commands.items()}

    def entries(self) -> dict[str, Entry]:
        return self._entries

    def entry(self, name: str) -> Entry | None:
        return self._entries.get(name)

    def report_failures(self) -> None:
        pass


def _load(entry: Entry, table: CommandTable) -> click.Command:
    target, _, plugin_name = entry
    if plugin_name is None:
        module_name, _, attr = target.partition(":")
        command = getattr(importlib.import_module(module_name), attr)  # ours: a failure is a bug
    else:
        from bridgecli import plugins

        try:
            command = plugins.resolve_target(target)
        except BridgeError:
            table.report_failures()
            raise
    if not isinstance(command, click.Command):
        raise click.ClickException(f"{target} is not a click command")
    return command


class LazyGroup(click.Group):
    """A click group whose subcommands come from a :class:`CommandTable`, imported on use."""

    def __init__(self, *args, table: CommandTable, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.table = table

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.table.entries())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = self.table.entry(cmd_name)
        return None if entry is None else _load(entry, self.table)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, help_, _) in sorted(self.table.entries().items())]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
        self.table.report_failures()
