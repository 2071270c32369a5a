"""The namespace lab cleans up after itself: a run leaves no namespace and no route behind.

A lab of its own (own prefix, so it never meets the session's ``netns_lab``), with one host:
built, checked, torn down, checked again. Nothing here connects to a lab address from the
root namespace; the route checks are lookups (``ip route get``), which send no packet.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.netns import RECORD_DIR, NetnsLab, lab_leftovers, netns_supported

pytestmark = pytest.mark.netns


def _unreachable_routes() -> str:
    return subprocess.run(
        ["ip", "route", "show", "table", "all", "type", "unreachable"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout


def _route_get(addr: str) -> subprocess.CompletedProcess:
    """The root namespace's route lookup for ``addr`` (no traffic)."""
    return subprocess.run(["ip", "route", "get", addr], capture_output=True, text=True, timeout=30)


def test_small_lab_tears_down_namespaces_and_the_unreachable_route(tmp_path: Path):
    reason = netns_supported()
    if reason:
        pytest.skip(reason)
    prefix = f"bl{os.getpid()}"
    assert lab_leftovers(prefix) == []
    lab = NetnsLab(tmp_path / "lab", hosts=("hostA",), prefix=prefix)
    try:
        lab.setup()
        subnet = lab.subnet
        assert subnet
        # while it runs: its namespaces exist, and the root namespace cannot route to them
        assert sorted(lab_leftovers(prefix)) == sorted(f"{prefix}-{n}" for n in ("lan", "broker", "hostA"))
        assert f"unreachable {subnet}" in _unreachable_routes()
        lookup = _route_get(lab.broker_addr)
        assert lookup.returncode != 0 and "no route to host" in lookup.stderr.lower(), lookup
        # ... while inside the lab the broker's address is on the LAN
        result = subprocess.run(
            ["ip", "netns", "exec", lab.ns("hostA"), "ip", "route", "get", lab.broker_addr],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 0 and "eth0" in result.stdout, result
        broker_pid = lab.broker.process.pid if lab.broker and lab.broker.process else None
    finally:
        failures = lab.teardown()
        shutil.rmtree(tmp_path / "lab", ignore_errors=True)
    assert failures == [], "no gateway was started, so none can fail the check"
    assert lab_leftovers(prefix) == []
    assert f"unreachable {subnet}" not in _unreachable_routes()
    assert not (RECORD_DIR / f"bridge-netns-{os.getpid()}-{prefix}.json").exists()
    if broker_pid is not None:
        assert subprocess.run(["kill", "-0", str(broker_pid)], capture_output=True).returncode != 0
