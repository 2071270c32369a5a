"""Small helpers shared by the cross-host suite and bench/reliability_report.py."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.support.netns import NetnsLab

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.2, what: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout:g}s")
        time.sleep(interval)


def register(lab: NetnsLab, host: str, label: str, role: str = "agent", deliver: str = "hold") -> str:
    """Register an entity on ``host``; returns its gid."""
    return lab.bridge(host, "register", "--label", label, "--role", role, "--deliver", deliver).stdout.strip()


def poll(lab: NetnsLab, host: str, gid: str, wait: str = "10s") -> list[dict[str, Any]]:
    return lab.bridge_json(host, "poll", "--as", gid, "--wait", wait)["messages"]


def poll_until(lab: NetnsLab, host: str, gid: str, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Drain ``gid``'s hold until ``count`` messages arrived (or fail with what did)."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += poll(lab, host, gid, "2s")
    assert len(got) >= count, f"only {len(got)} of {count} messages reached {host}"
    return got


def roster_snapshot(lab: NetnsLab, host: str) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """One ``bridge roster --json`` on ``host``: ({gid: entry}, host ids with a live gateway);
    both empty when the call fails."""
    result = lab.bridge(host, "roster", "--json", check=False)
    if result.returncode != 0:
        return {}, set()
    data = json.loads(result.stdout)
    entries = data.get("entries", data) if isinstance(data, dict) else data
    gateways = data.get("gateways", []) if isinstance(data, dict) else []
    return (
        {entry["gid"]: entry for entry in entries if isinstance(entry, dict) and "gid" in entry},
        {g["host"] for g in gateways if isinstance(g, dict) and "host" in g},
    )


def roster_gids(lab: NetnsLab, host: str) -> dict[str, dict[str, Any]]:
    """{gid: entry} of ``bridge roster --json`` on ``host`` ({} when it fails)."""
    return roster_snapshot(lab, host)[0]


def wait_announced(lab: NetnsLab, host: str, gid: str, timeout: float = 30.0) -> None:
    """Wait until ``gid`` is in ``host``'s union roster."""
    wait_for(lambda: gid in roster_gids(lab, host), timeout, 0.3, f"{gid[:8]} in {host}'s roster")


def exec_sink(path: Path) -> str:
    """A ``--deliver`` spec that appends every delivered envelope as one JSON line.

    The line goes out in a single ``write`` (dash's printf flushes once): with ``cat; echo`` a
    gateway killed between the two left an envelope without its newline, and the redelivered copy
    was glued onto it.
    """
    return f"exec:line=$(cat); printf '%s\\n' \"$line\" >> {path}"


def read_sink(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
