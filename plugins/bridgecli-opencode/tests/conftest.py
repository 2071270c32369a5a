"""Fixtures for the OpenCode plugin: one real ``opencode serve`` per test module (each test
makes its own session in it), killed in teardown; nothing is faked."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from oc_helpers import Server

from bridgecli.interfaces import LaunchHandle


@pytest.fixture(scope="module")
def oc_server() -> Iterator[Server]:
    """A password-protected OpenCode server on a loopback port, in a private temp dir."""
    root = Path(tempfile.mkdtemp(prefix="oc", dir="/tmp"))
    server = Server(root)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def make_backend(bridge_home) -> object:
    """Build the backend the way the gateway does: the plugin's factory with a
    BackendContext from ``bridgecli.config.load()`` of an isolated host."""
    from bridgecli import config, plugins
    from bridgecli.interfaces import BackendContext

    def build(settings: str = "") -> object:
        bridge_home.config_file.parent.mkdir(parents=True, exist_ok=True)
        bridge_home.config_file.write_text("[plugins.opencode]\n" + settings)
        plugins.reset()
        factory = plugins.get().provider("backends", "opencode")
        return factory(BackendContext(config=config.load(), state_dir=bridge_home.root, host_id="test"))

    return build


@pytest.fixture
def launcher(bridge_home):
    from bridgecli import config, plugins

    plugins.reset()
    return plugins.get().provider("launchers", "opencode")(config.load())


@pytest.fixture
def started(launcher) -> Iterator[list[LaunchHandle]]:
    """Every handle a test starts, stopped in teardown even when the test fails."""
    handles: list[LaunchHandle] = []
    yield handles
    for handle in handles:
        launcher.stop(handle)
