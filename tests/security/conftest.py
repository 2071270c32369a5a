"""Fixtures of the security suite: one real hub with a joined hostB for the whole package.

The same lab as ``tests/multihost/hub_lab.py``, shared across this package's modules (a hub
costs about a minute to build); no test here revokes, restarts or partitions anything.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.multihost.hub_lab import running_lab
from tests.support.netns import NetnsLab


@pytest.fixture(scope="package")
def hub_lab() -> Iterator[NetnsLab]:
    """The hub running, hostB joined with its gateway and the hub's own gateway running."""
    yield from running_lab("bsec")
