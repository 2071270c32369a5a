"""Helpers shared by the tmux plugin tests (a uniquely named module: several test dirs
have a conftest.py, so importing from \"conftest\" would be ambiguous)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def wait_for(predicate: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true (tests wait on terminals, never sleep blindly)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def write_config(xdg: Path, text: str) -> None:
    """Write ``bridge.toml`` for the isolated host."""
    path = xdg / "config" / "bridge" / "bridge.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
