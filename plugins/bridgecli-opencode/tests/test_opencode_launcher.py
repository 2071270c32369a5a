"""The ``opencode`` launcher with the real OpenCode: a password-protected loopback server
with a session, ready, reachable by the backend, stopped for good."""

from __future__ import annotations

import json
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from oc_helpers import envelope, launch_spec, launched_entity, opencode_bin, user_texts, wait_for

from bridgecli.errors import BridgeError
from bridgecli_opencode.client import Address, Client, Refused


@pytest.fixture
def launch_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="ocl", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_start_ready_deliver_stop(launcher, started, make_backend, launch_root) -> None:
    first = f"first-{uuid.uuid4().hex[:8]}"
    s = launch_spec(launch_root, [opencode_bin(), f"--prompt={first}"])
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
    entity = launched_entity(handle)
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
        launcher.start(launch_spec(launch_root, ["sh"]))  # `sh serve …`: no such file
    assert not (launch_root / "spawn" / "oc1" / "opencode-password").exists()


def test_missing_program_and_extra_arguments(launcher, launch_root) -> None:
    with pytest.raises(BridgeError, match="install OpenCode"):
        launcher.start(launch_spec(launch_root, ["/nonexistent/opencode"]))
    with pytest.raises(BridgeError, match="cannot pass"):
        launcher.start(launch_spec(launch_root, ["opencode", "--model", "x/y"], label="oc2"))
