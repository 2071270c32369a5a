"""click parameter types shared by several commands."""

from __future__ import annotations

import click

from bridgecli.durations import parse


class Duration(click.ParamType):
    """click type for ``--wait 10m`` and friends (the forms :func:`bridgecli.durations.parse` takes)."""

    name = "duration"

    def convert(self, value, param, ctx):  # type: ignore[override]
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION = Duration()
