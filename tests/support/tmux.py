"""Private tmux servers in tests: start-up is each fixture's own, the stop is shared."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def server_pid(sock: str) -> int:
    """The pid of the tmux server on ``sock`` (for :func:`stop_server`)."""
    out = subprocess.run(
        ["tmux", "-S", sock, "display-message", "-p", "#{pid}"], capture_output=True, text=True, check=True
    ).stdout
    return int(out.strip())


def stop_server(sock: str, pid: int) -> None:
    """``kill-server``, then make sure the server is gone: once in CI a test's server (with
    a stopped gateway's control-mode client still attached) outlived its ``kill-server``
    and stayed behind after the run."""
    subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
    deadline = time.monotonic() + 3.0
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if running(pid):
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
