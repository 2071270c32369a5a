"""The ``opencode`` launcher with the real OpenCode: a password-protected loopback server
with a session, ready, reachable by the backend, stopped for good."""

from __future__ import annotations

import json
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridgecli_opencode.client import Address, Client, Refused
from oc_helpers import envelope, opencode_bin, opencode_env, user_texts, wait_for

from bridgecli.errors import BridgeError
from bridgecli.interfaces import Entity, LaunchHandle, LaunchSpec


@pytest.fixture
def launch_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="ocl", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


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


def spec(root: Path, command: list[str], label: str = "oc1") -> LaunchSpec:
    gid = str(uuid.uuid4())
    log_dir = root / "spawn" / label
    log_dir.mkdir(parents=True, mode=0o700)
    (root / "project").mkdir(exist_ok=True)
    return LaunchSpec(
        gid=gid,
        label=label,
        role="agent",
        profile_name="oc",
        command=command,
        cwd=str(root / "project"),
        env={**opencode_env(root / "oc"), "BRIDGE_GID": gid, "BRIDGE_HOST_ID": "test"},
        profile={"launcher": "opencode", "ready_timeout": 60},
        log_dir=log_dir,
    )


def _entity(handle: LaunchHandle) -> Entity:
    return Entity(
        gid=str(uuid.uuid4()),
        label="oc1",
        role="agent",
        deliver=handle.deliver,
        host="test",
        created=time.time(),
        launcher="opencode",
        launch_data=dict(handle.data),
    )


@pytest.mark.slow
def test_start_ready_deliver_stop(launcher, started, make_backend, launch_root) -> None:
    first = f"first-{uuid.uuid4().hex[:8]}"
    s = spec(launch_root, [opencode_bin(), f"--prompt={first}"])
    handle = launcher.start(s)
    started.append(handle)
    data = handle.data
    json.dumps(dict(data))  # stored with the entity
    assert handle.deliver == f"opencode:{data['url']}#{data['session']}" and data["url"].startswith("http://127.0.0.1:")
    password_file = Path(data["password_file"])
    assert password_file.parent == s.log_dir and stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert data["attach"] == [opencode_bin(), "attach", data["url"], "--session", data["session"]]
    launcher.wait_ready(handle, timeout=30)
    assert launcher.status(handle) == "running"

    # loopback only, and nothing is served without the password
    address = Address("http", "127.0.0.1", int(data["url"].rsplit(":", 1)[1]), data["session"])
    with pytest.raises(Refused) as caught:
        Client(address, None).request("GET", "/session")
    assert caught.value.status == 401

    backend = make_backend()
    entity = _entity(handle)
    got = backend.deliver(entity, envelope("hello from the launcher test"))
    authed = Client(address, password_file.read_text().strip())
    stored = user_texts(authed.request("GET", f"/session/{data['session']}/message")[1])
    assert list(stored.values())[0] == first  # the spawn's first prompt came first
    assert got.ref in stored and "hello from the launcher test" in stored[got.ref]

    launcher.stop(handle)
    assert launcher.status(handle) == "gone" and not password_file.exists()
    wait_for(lambda: backend.status(entity) in ("gone", "unknown"), what="the backend to see the server gone")
    launcher.stop(handle)  # idempotent


def test_a_command_that_is_not_opencode_reports_its_output(launcher, started, launch_root) -> None:
    with pytest.raises(BridgeError, match=r"exited \(\d+\) before it listened: .*serve"):
        launcher.start(spec(launch_root, ["sh"]))  # `sh serve …`: no such file
    assert not (launch_root / "spawn" / "oc1" / "opencode-password").exists()


def test_missing_program_and_extra_arguments(launcher, launch_root) -> None:
    with pytest.raises(BridgeError, match="install OpenCode"):
        launcher.start(spec(launch_root, ["/nonexistent/opencode"]))
    with pytest.raises(BridgeError, match="cannot pass"):
        launcher.start(spec(launch_root, ["opencode", "--model", "x/y"], label="oc2"))
