"""``opencode_tui = true``: the spawn opens OpenCode's TUI in a tmux window, attached to the
spawned session with the password from its file, and a delivered message shows up there."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from oc_helpers import envelope, launch_spec, launched_entity, opencode_bin, opencode_env, wait_for

from tests.support.tmux import server_pid, stop_server

pytestmark = pytest.mark.slow


@pytest.fixture
def tmux_socket() -> Iterator[tuple[str, Path]]:
    """A private tmux server whose windows get OpenCode's offline environment."""
    root = Path(tempfile.mkdtemp(prefix="oct", dir="/tmp"))
    sock = str(root / "s")
    env = {k: v for k, v in opencode_env(root / "tui").items() if not k.startswith("TMUX")}
    subprocess.run(
        ["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "200", "-y", "50"],
        check=True,
        env=env,
    )
    pid = server_pid(sock)
    yield sock, root
    stop_server(sock, pid)
    shutil.rmtree(root, ignore_errors=True)


def _capture(sock: str, pane: str) -> str:
    return subprocess.run(
        ["tmux", "-S", sock, "capture-pane", "-p", "-J", "-t", pane, "-S", "-200"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "TMUX"},
    ).stdout


def test_tui_window_shows_a_delivered_message(launcher, started, make_backend, tmux_socket) -> None:
    sock, root = tmux_socket
    s = launch_spec(root, [opencode_bin()])
    s = type(s)(**{**s.__dict__, "profile": {**s.profile, "opencode_tui": True, "tmux_socket": sock}})
    handle = launcher.start(s)
    started.append(handle)
    pane = handle.data["tui"]["pane"]
    assert "OPENCODE_SERVER_PASSWORD" not in " ".join(handle.data["attach"])
    env = envelope("visible in the attached TUI")
    make_backend().deliver(launched_entity(handle), env)
    try:
        wait_for(
            lambda: "visible in the attached TUI" in _capture(sock, pane), timeout=60, what="the message in the TUI"
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_capture(sock, pane)}") from None
    assert f"[bridge {env.msg_id[:8]}]" in _capture(sock, pane)
    launcher.stop(handle)
    panes = subprocess.run(["tmux", "-S", sock, "list-panes", "-a", "-F", "#{pane_id}"], capture_output=True, text=True)
    assert pane not in panes.stdout.split()
