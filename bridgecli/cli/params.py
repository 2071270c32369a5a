"""click parameter types shared by several commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from bridgecli.durations import parse


class Duration(click.ParamType):
    """click type for ``--wait 10m`` and friends (the forms :func:`bridgecli.durations.parse` takes)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION = Duration()


def as_entity(dest: str, help: str) -> Callable[[Any], Any]:
    """The ``--as GID|LABEL`` option (env ``BRIDGE_GID``): which entity of this host a command
    acts for, stored as ``dest``; one definition, so every command reads it the same way."""
    from bridgecli.cli import complete

    return click.option(
        "--as",
        dest,
        envvar="BRIDGE_GID",
        show_envvar=True,
        default=None,
        metavar="GID|LABEL",
        shell_complete=complete.local_targets,
        help=help,
    )
