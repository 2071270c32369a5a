"""Real RabbitMQ nodes for tests (no mocks): one per session, more on demand.

Nodes are :class:`bridgecli.localbroker.LocalNode` processes in short temp dirs under /tmp
(Unix socket paths are limited to 108 characters) on free ports, so parallel suites and a
user's own broker never collide. Set ``BRIDGE_TEST_BROKER_URI`` to reuse a broker you
already run for quick local iterations; fixtures that need to control the node (ctl,
restart) then skip.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bridgecli.localbroker import LocalNode, stop_epmd_if_idle


class ManagedBroker:
    """A node the test suite started and therefore may stop, restart and configure."""

    def __init__(self, node: LocalNode) -> None:
        self.node = node

    @property
    def uri(self) -> str:
        return self.node.uri

    @property
    def port(self) -> int:
        return self.node.port

    def ctl(self, *args: str, check: bool = True):
        """``rabbitmqctl -n NODE ARGS`` with the node's cookie; returns CompletedProcess."""
        return self.node.ctl(*args, check=check)

    def start(self) -> None:
        self.node.start(keep_ports=True)

    def stop(self) -> None:
        self.node.stop()

    def restart(self) -> None:
        self.node.restart()


class ExternalBroker:
    """A broker given by ``BRIDGE_TEST_BROKER_URI``: usable, but not ours to control."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.port = urlsplit(uri).port or 5672

    def _skip(self, *_: object, **__: object):
        pytest.skip("needs a test-managed RabbitMQ node (unset BRIDGE_TEST_BROKER_URI)")

    ctl = start = stop = restart = _skip


def _new_node(extra_conf: Sequence[str] = ()) -> LocalNode:
    base = Path(tempfile.mkdtemp(prefix="brq", dir="/tmp"))
    return LocalNode(base, extra_conf=extra_conf)


def _dispose(node: LocalNode) -> None:
    try:
        node.stop()
    finally:
        shutil.rmtree(node.base, ignore_errors=True)


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[ManagedBroker | ExternalBroker]:
    """The session's RabbitMQ broker: ``.uri``, ``.port``, ``.ctl(*args)``, ``.start()``,
    ``.stop()``, ``.restart()``. A private node on free ports, stopped at the end; or the
    broker named by ``BRIDGE_TEST_BROKER_URI`` when that is set. A test that stops the node
    must start it again before it returns."""
    external = os.environ.get("BRIDGE_TEST_BROKER_URI")
    if external:
        yield ExternalBroker(external)
        return
    node = _new_node()
    try:
        node.start()
        yield ManagedBroker(node)
    finally:
        _dispose(node)
        # epmd is shared by every Erlang node on the machine; leave it to a node that is
        # still registered (another suite, a user's broker), stop it only when idle
        stop_epmd_if_idle()


@pytest.fixture
def rabbitmq_node_factory() -> Iterator[Callable[[Sequence[str]], ManagedBroker]]:
    """Start extra private nodes with special ``rabbitmq.conf`` lines, e.g.
    ``rabbitmq_node_factory(["consumer_timeout = 5000"])``. Each start costs ~5 s; every
    node is stopped when the test ends."""
    nodes: list[LocalNode] = []

    def make(extra_conf_lines: Sequence[str] = ()) -> ManagedBroker:
        node = _new_node(extra_conf_lines)
        nodes.append(node)
        node.start()
        return ManagedBroker(node)

    yield make
    for node in nodes:
        _dispose(node)


@pytest.fixture
def vhost_uri(rabbitmq) -> Iterator[str]:
    """The session broker's URI in a fresh vhost of its own (guest has every permission):
    a test that needs the shared objects (``bridge.dlq``, ``bridge.delay``) to itself, or
    declared with other arguments, gets them without a node of its own. Deleted after."""
    import uuid

    if not isinstance(rabbitmq, ManagedBroker):
        pytest.skip("needs a broker the suite manages (BRIDGE_TEST_BROKER_URI is set)")
    name = f"t{uuid.uuid4().hex[:10]}"
    rabbitmq.ctl("add_vhost", name)
    rabbitmq.ctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
    try:
        yield f"{rabbitmq.uri.rstrip('/')}/{name}"
    finally:
        rabbitmq.ctl("delete_vhost", name, check=False)
