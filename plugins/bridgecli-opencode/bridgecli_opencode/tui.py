"""OpenCode's TUI on a spawned server: the ``opencode attach`` command, and a tmux window
that runs it (profile ``opencode_tui = true``).

The password reaches the TUI through ``OPENCODE_SERVER_PASSWORD`` read from the 0600 file by
the window's shell, never through an argument: other users can read every process's argv.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping
from typing import Any

from bridgecli.errors import BridgeError
from bridgecli.interfaces import LaunchSpec

#: the tmux session a TUI window opens in when the profile names none
DEFAULT_TMUX_SESSION = "bridge"
#: the shell line a TUI window runs: $0 password file, $1 program, $2 URL, $3 session
_ATTACH_SCRIPT = 'OPENCODE_SERVER_PASSWORD="$(cat "$0")" exec "$1" attach "$2" --session "$3"'


def attach_argv(binary: str, url: str, session: str) -> list[str]:
    """The TUI command for ``session`` on ``url`` (the password comes from the environment)."""
    return [binary, "attach", url, "--session", session]


def attach_hint(binary: str, data: Mapping[str, Any]) -> str:
    """The attach command as a user types it in a shell, password read from its file."""
    argv = attach_argv(binary, str(data["url"]), str(data["session"]))
    return f'OPENCODE_SERVER_PASSWORD="$(cat {shlex.quote(str(data["password_file"]))})" ' + shlex.join(argv)


def _tmux(socket: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    flag = ["-S", socket] if socket and "/" in socket else (["-L", socket] if socket else [])
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    try:
        return subprocess.run(["tmux", *flag, *args], capture_output=True, text=True, timeout=20, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BridgeError(
            f"cannot run tmux for the OpenCode TUI ({exc})", "install tmux, or unset opencode_tui"
        ) from None


def open_tui(spec: LaunchSpec, binary: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """Open a detached tmux window attached to the spawned session; returns what
    :func:`kill_tui` needs (socket, pane). The session (profile ``tmux_session``) is created
    detached when missing; ``tmux_socket`` (else ``BRIDGE_TMUX_SOCKET``) picks the server."""
    socket = spec.profile.get("tmux_socket") or os.environ.get("BRIDGE_TMUX_SOCKET") or None
    session = str(spec.profile.get("tmux_session") or DEFAULT_TMUX_SESSION)
    if _tmux(socket, "has-session", "-t", f"={session}").returncode != 0:
        made = _tmux(socket, "new-session", "-d", "-s", session)
        if made.returncode != 0:
            raise BridgeError(f"tmux could not create session {session!r}: {made.stderr.strip()}", "check tmux")
    args = ["new-window", "-d", "-t", f"{session}:", "-n", spec.label[:32] or "opencode", "-P", "-F", "#{pane_id}"]
    if spec.cwd:
        args += ["-c", spec.cwd]
    script = [_ATTACH_SCRIPT, str(data["password_file"]), binary, str(data["url"]), str(data["session"])]
    done = _tmux(socket, *args, "--", "sh", "-c", *script)
    if done.returncode != 0:
        raise BridgeError(f"tmux could not open the OpenCode TUI: {done.stderr.strip()}", "check tmux_session")
    return {"socket": socket, "pane": done.stdout.strip().splitlines()[0]}


def kill_tui(tui: Mapping[str, Any]) -> None:
    """Close the TUI's pane; a pane (or tmux server) already gone is fine."""
    if tui.get("pane"):
        _tmux(tui.get("socket"), "kill-pane", "-t", str(tui["pane"]))
