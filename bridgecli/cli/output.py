"""All terminal output of commands goes through here: data on stdout, diagnostics on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click


def data(obj: Any, compact: bool = False) -> None:
    """Print machine-readable data (``--json``) on stdout; ``compact`` prints it on one line
    (a stream of documents, e.g. ``--watch --json``, one per line)."""
    if compact:
        click.echo(json.dumps(obj, ensure_ascii=False, default=str, separators=(",", ":")))
    else:
        click.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def line(text: str = "") -> None:
    """Print one line of human-readable data on stdout."""
    click.echo(text)


def note(text: str) -> None:
    """A diagnostic for the human (stderr), never parsed by scripts."""
    click.echo(text, err=True)


def warn(text: str) -> None:
    click.echo(f"bridge: warning: {text}", err=True)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A plain aligned table on stdout (no colours, so it pipes cleanly)."""
    rows = [["" if cell is None else str(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    click.echo(fmt.format(*headers).rstrip())
    for row in rows:
        click.echo(fmt.format(*row).rstrip())


def json_option(func):  # decorator
    """The ``--json`` flag every data-printing command carries."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")(func)


def is_tty() -> bool:
    return sys.stdout.isatty()
