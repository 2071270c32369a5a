"""Helpers shared by the tmux plugin tests (a uniquely named module: several test dirs
have a conftest.py, so importing from \"conftest\" would be ambiguous)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable


def wait_for(predicate: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true (tests wait on terminals, never sleep blindly)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def write_config(xdg: Path, text: str) -> None:
    """Write ``bridge.toml`` for the isolated host."""
    path = xdg / "config" / "bridge" / "bridge.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def server_pid(sock: str) -> int:
    """The pid of the tmux server on ``sock`` (for :func:`stop_server`)."""
    out = subprocess.run(["tmux", "-S", sock, "display-message", "-p", "#{pid}"], capture_output=True,
                         text=True, check=True).stdout
    return int(out.strip())


def stop_server(sock: str, pid: int) -> None:
    """``kill-server``, then make sure the server is gone: once in CI a test's server (with
    a stopped gateway's control-mode client still attached) outlived its ``kill-server``
    and stayed behind after the run."""
    subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        if not running(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def running(pid: int) -> bool:
    """Is ``pid`` a live process? (An exited daemon waits as a zombie until init reaps it.)"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
