"""Fixtures of the cross-host suite: gateways on the namespace hosts of ``netns_lab``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.multihost.hub_lab import hub_lab  # noqa: F401  (a fixture of this suite)
from tests.support.netns import NetnsLab


@pytest.fixture
def lab(netns_lab: NetnsLab) -> Iterator[NetnsLab]:
    """The namespace lab with a connected gateway on hostA and hostB.

    Gateways persist across tests (a start costs ~1 s); a test that stops, kills or
    partitions one leaves it to this fixture to bring it back, so every test starts from
    two healthy gateways. After each test both get the teardown check (alive unless the test
    stopped them, no undeclared error logged meanwhile); the SIGTERM comes at the session's end.
    """
    for name in ("hostA", "hostB"):
        netns_lab.heal(name)
        host = netns_lab.host(name)
        if host.gateway is None or host.gateway.poll() is not None:
            netns_lab.start_gateway(name)
    yield netns_lab
    for name in ("hostA", "hostB"):
        netns_lab.heal(name)
    if netns_lab.broker is not None and not netns_lab.broker.is_running():
        netns_lab.broker.start()
    failures = netns_lab.check_gateways(("hostA", "hostB"))
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
