"""A real ``bridge relay`` subprocess for tests, run as a host's environment (no gateway)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.support.env import BRIDGE_BIN
from tests.support.hosts import Host


class Relay:
    """``bridge relay --id NAME --every 0.5`` with ``host``'s environment; its stderr is kept."""

    def __init__(self, host: Host, name: str) -> None:
        self.name = name
        self.log = Path(host.root) / f"relay-{name}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [BRIDGE_BIN, "relay", "--id", name, "--every", "0.5"],
                env=host.env,
                stdout=subprocess.DEVNULL,
                stderr=out,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def serving(self) -> bool:
        """Consuming its queue (it logs ``relay NAME serving``); fails if it exited."""
        assert self.proc.poll() is None, self.text()
        return f"relay {self.name} serving" in self.text()

    def end(self) -> None:
        """SIGTERM, then SIGKILL of its process group after 15 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def kill(self) -> None:
        """``kill -9``: no goodbye, as a lost machine."""
        self.proc.kill()
        self.proc.wait()
