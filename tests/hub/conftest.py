"""One real RabbitMQ node with the management plugin, shared by the hub's tests (a start
and stop cost ~14 s on two cores; each test uses its own users, gids and host ids)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridgecli.hub.rabbitadmin import RabbitAdmin
from bridgecli.nodeprocess import stop_epmd_if_idle
from bridgecli.rabbitnode import LocalNode


@pytest.fixture(scope="package")
def node() -> Iterator[LocalNode]:
    base = Path(tempfile.mkdtemp(prefix="brhub", dir="/tmp"))
    node = LocalNode(base, management=True, host_user="hub-machine")  # secured, as the hub's is
    try:
        node.start()
        RabbitAdmin(node.management_port, *node.admin_credentials).wait_ready(60)
        yield node
    finally:
        node.stop()
        shutil.rmtree(base, ignore_errors=True)
        stop_epmd_if_idle()


@pytest.fixture
def admin(node) -> RabbitAdmin:
    return RabbitAdmin(node.management_port, *node.admin_credentials)
