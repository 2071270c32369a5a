"""What the bench scripts share: medians and percentiles of samples, and the printed table.

A script imports it as ``_common`` (``bench/`` is on ``sys.path`` when a script runs, and
``bench/run_all.py`` runs them from there); one copy, so every table reads the same way.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any


def median(values: Iterable[float]) -> float:
    """Median of the known values (NaN marks a figure a run could not read); NaN if none."""
    known = [v for v in values if not math.isnan(v)]
    return statistics.median(known) if known else float("nan")


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds the processes ``pids`` (all their threads) have used so far,
    from ``/proc``: what a stage costs in work, beside what it costs in time."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


class CpuPerRound:
    """Appends to ``into`` the CPU ms that ``pids`` used per round between :meth:`start` and
    :meth:`stop`; reads nothing when ``into`` is None (``/proc`` is Linux's)."""

    def __init__(self, pids: list[int], into: list[float] | None) -> None:
        self.pids, self.into = pids, into
        self._started = 0.0

    def start(self) -> None:
        if self.into is not None:
            self._started = cpu_seconds(self.pids)

    def stop(self, rounds: int) -> None:
        if self.into is not None:
            self.into.append((cpu_seconds(self.pids) - self._started) * 1000 / rounds)


def pct(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank; NaN without values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


@dataclass(frozen=True)
class Column:
    """One column of a printed table: its header, width, alignment (``<`` or ``>``) and how
    a row's cell reads."""

    header: str
    width: int
    cell: Callable[[dict[str, Any]], Any]
    align: str = "<"

    def render(self, text: Any) -> str:
        return f"{text!s:{self.align}{self.width}}"


def key(name: str) -> Callable[[dict[str, Any]], Any]:
    """A cell that is the row's ``name`` value ("" when None)."""
    return lambda row: "" if row.get(name) is None else row[name]


def ratio_cell(row: dict[str, Any]) -> str:
    """The row's ``ratio`` as ``1.23x`` ("" when None)."""
    return "" if row.get("ratio") is None else f"{row['ratio']:g}x"


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> None:
    """Print a header line and one line per row, the columns one space apart."""
    print(" ".join(c.render(c.header) for c in columns).rstrip())
    for row in rows:
        print(" ".join(c.render(c.cell(row)) for c in columns).rstrip())
