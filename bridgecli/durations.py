"""Durations as people type them on the command line: ``30s``, ``10m``, ``1h30m``, ``500ms``,
or a bare number of seconds.

Pure (no click): the click-free send path (:mod:`bridgecli.fast_send`) parses ``--wait`` with
it too. The click parameter type lives in :mod:`bridgecli.cli.params`."""

from __future__ import annotations

import math
import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse(text: str) -> float:
    """Seconds in ``text``; raises ValueError with the accepted forms."""
    text = text.strip().lower()
    try:
        value = float(text)
    except ValueError:
        pos, value = 0, 0.0
        for match in _PART.finditer(text):
            if match.start() != pos:
                break
            value += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos != len(text) or not text:
            raise ValueError(f"{text!r} is not a duration (use e.g. 30s, 10m, 1h30m, 500ms)") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a duration (use e.g. 30s, 10m, 1h30m, 500ms)")
    if value < 0:
        raise ValueError("a duration cannot be negative")
    return value
