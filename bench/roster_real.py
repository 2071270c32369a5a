"""The real side of ``bench/roster_scale.py``: one ``bridge gateway`` process with its own
XDG dirs (:class:`RealGateway`) and the /proc readings the bench measures CPU with.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV_BIN = Path(sys.executable).parent
PYTHON = str(VENV_BIN / "python")
BRIDGE = str(VENV_BIN / "bridge")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def runq_wait_seconds(pid: int) -> float:
    """Time the threads of ``pid`` spent runnable but waiting for a CPU (schedstat), in s."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores from /proc/stat."""
    with open("/proc/stat") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def isolated_env(root: Path, host: str, uri: str) -> dict[str, str]:
    """This process's environment without bridge's variables, with XDG dirs of its own under
    ``root``, host id ``host`` and broker ``uri``: one more bridge "host" on this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRIDGE_", "XDG_", "OCB_"))}
    for part in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
        path = root / part.lower()
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        env[f"XDG_{part}_{'DIR' if part == 'RUNTIME' else 'HOME'}"] = str(path)
    env.update({"BRIDGE_HOST_ID": host, "BRIDGE_BROKER_URI": uri})
    return env


class RealGateway:
    """``bridge gateway`` with its own XDG dirs, host id, broker URI and roster interval."""

    def __init__(self, root: Path, uri: str, interval: float) -> None:
        self.host = f"real-{uuid.uuid4().hex[:6]}"
        self.root = root / self.host
        self.env = isolated_env(self.root, self.host, uri)
        self.env["BRIDGE_ROSTER_INTERVAL"] = f"{interval:g}"
        self.proc: subprocess.Popen | None = None
        self.log_path = self.root / "gateway.log"

    @property
    def socket(self) -> Path:
        return Path(self.env["XDG_RUNTIME_DIR"]) / "bridge" / "gateway.sock"

    def register(self, count: int) -> None:
        for i in range(count):
            proc = subprocess.run(
                [BRIDGE, "register", "--label", f"e{i}", "--deliver", "hold"],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"bridge register exited {proc.returncode}: {proc.stderr.strip()}")

    def start(self, profile_to: Path | None = None, timeout: float = 60, no_cache: bool = False) -> None:
        """Start it; ``no_cache`` stubs out the per-heartbeat ``roster.json`` write (an A/B
        that isolates its cost; bench only)."""
        argv = [BRIDGE, "gateway"]
        if no_cache:
            argv = [
                PYTHON,
                "-c",
                "import sys; from bridgecli import cache; cache.save_roster = lambda view: True; "
                "from bridgecli.cli import main; sys.argv = ['bridge', 'gateway']; main()",
            ]
        if profile_to is not None:
            argv = [PYTHON, "-m", "cProfile", "-o", str(profile_to), "-m", "bridgecli", "gateway"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited {self.proc.returncode}: {self.log()}")
            status = self.status()
            if status and status["broker"]["connected"]:
                return
            time.sleep(0.1)
        raise RuntimeError(f"gateway not connected after {timeout}s: {self.log()}")

    def status(self) -> dict[str, Any] | None:
        from bridgecli.gateway.client import ping

        return ping(self.socket)

    def roster_counters(self) -> dict[str, int]:
        """entities/gateways in its view and frames sent/received, from ``status``."""
        status = self.status() or {}
        text = str(status.get("extra", {}).get("roster", ""))
        match = re.search(r"(\d+) entities on (\d+) gateways; frames sent (\d+), received (\d+)", text)
        if not match:
            return {}
        return dict(zip(("entities", "gateways", "sent", "received"), map(int, match.groups()), strict=True))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""
