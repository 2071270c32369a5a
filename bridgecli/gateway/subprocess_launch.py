"""The built-in ``subprocess`` launcher: headless agents as child processes of the gateway.

Profile keys: ``command`` (string → ``/bin/sh -c``; list → exec'd), ``cwd``, ``env``,
``deliver`` (default ``hold``: a headless agent pulls with ``bridge poll``), ``ready_line``
(regex: ready once a stdout line matches; else ready = alive after ``ready_grace`` s, default
0.5) and ``ready_timeout``. The child gets ``BRIDGE_GID``, ``BRIDGE_HOST_ID`` and
``BRIDGE_GATEWAY_SOCKET`` on top of the gateway's environment, runs in its own session (so
stop can kill its process group) and logs under the gateway's state dir.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from bridgecli.config import Setting, non_negative, regexes
from bridgecli.errors import BridgeError, Timeout
from bridgecli.interfaces import LaunchHandle, LaunchSpec
from bridgecli.nodeprocess import pid_alive

NAME = "subprocess"

#: Its profile keys besides the common ones, for ``bridge config set profiles.NAME.KEY``.
PROFILE_SETTINGS = (
    Setting("deliver", str, "hold", "How messages reach the new entity (BACKEND[:ADDRESS])."),
    Setting("ready_line", str, None, "Regex: ready once a line of its stdout matches.", check=regexes),
    Setting(
        "ready_grace",
        float,
        0.5,
        "Without ready_line: ready when still alive after this many seconds.",
        check=non_negative,
    ),
)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return ""
    return " | ".join(text[-lines:])


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass  # not our child (gateway restarted): fall back to kill(0)
    return pid_alive(pid)


def _private(path: Any) -> Any:
    """``path`` opened for writing from its start, readable by this user only."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")


class SubprocessLauncher:
    def __init__(self, config: Any) -> None:
        self.config = config

    def start(self, spec: LaunchSpec) -> LaunchHandle:
        """Start the profile's command with its output in the spawn's log dir (0600 files:
        an agent's output holds what it was told)."""
        stdout_path, stderr_path = spec.log_dir / "stdout.log", spec.log_dir / "stderr.log"
        command = spec.command
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else [str(c) for c in command]
        env = {**os.environ, **spec.env}
        try:
            with _private(stdout_path) as out, _private(stderr_path) as err:
                proc = subprocess.Popen(
                    argv,
                    cwd=spec.cwd or None,
                    env=env,
                    stdout=out,
                    stderr=err,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
        except (OSError, ValueError) as exc:
            raise BridgeError(
                f"cannot start {spec.profile_name!r}: {exc}", "check the profile's command and cwd"
            ) from None
        deliver = str(spec.profile.get("deliver", "hold"))
        return LaunchHandle(
            launcher=NAME,
            deliver=deliver,
            data={
                "pid": proc.pid,
                "stdout": str(stdout_path),
                "stderr": str(stderr_path),
                "ready_line": spec.profile.get("ready_line"),
                "ready_grace": float(spec.profile.get("ready_grace", 0.5)),
                "profile": spec.profile_name,
            },
        )

    def wait_ready(self, handle: LaunchHandle, timeout: float) -> None:
        data = handle.data
        pid = int(data["pid"])
        pattern = re.compile(data["ready_line"]) if data.get("ready_line") else None
        start = time.monotonic()
        deadline = start + timeout
        while time.monotonic() < deadline:
            if not _alive(pid):
                stderr = _tail(Path(data["stderr"])) or "no stderr"
                raise BridgeError(
                    f"{data['profile']} exited before it was ready: {stderr}",
                    "fix the profile's command (its stderr is shown above)",
                )
            if pattern is not None:
                try:
                    text = Path(data["stdout"]).read_text(errors="replace")
                except FileNotFoundError:
                    text = ""
                if any(pattern.search(line) for line in text.splitlines()):
                    return
            elif time.monotonic() - start >= data.get("ready_grace", 0.5):
                return
            time.sleep(0.05)
        raise Timeout(
            f"{data['profile']} was not ready within {timeout:g}s"
            + (f" (no stdout line matched {data['ready_line']!r})" if pattern else ""),
            "raise --wait-ready, or check the agent's log: " + data["stdout"],
        )

    def stop(self, handle: LaunchHandle) -> None:
        pid = int(handle.data["pid"])
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not _alive(pid):
                    return
                time.sleep(0.05)

    def status(self, handle: LaunchHandle) -> str:
        return "running" if _alive(int(handle.data["pid"])) else "gone"
