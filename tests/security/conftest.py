"""Fixtures of the security suite: one real hub with a joined hostB for the whole package.

The same lab as ``tests/multihost/hub_lab.py``, shared across this package's modules (a hub
costs about a minute to build); no test here revokes, restarts or partitions anything.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.multihost import hub_lab as lab_module
from tests.support.netns import NetnsLab, netns_supported


@pytest.fixture(scope="package")
def hub_lab() -> Iterator[NetnsLab]:
    """The hub running, hostB joined with its gateway and the hub's own gateway running."""
    reason = netns_supported()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="bsec", dir="/tmp"))
    lab = NetnsLab(root)
    failures: list[str] = []
    try:
        lab = lab_module.build(root)
        lab_module.join(lab, "hostB")
        lab.start_gateway("hostB")
        yield lab
    finally:
        failures = lab.teardown()
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
