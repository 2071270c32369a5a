"""click parameter types shared by several commands."""

from __future__ import annotations

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
