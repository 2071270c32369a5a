"""The messaging benches' world: a private RabbitMQ node and simulated hosts, each with its
own XDG dirs, host id and ``bridge gateway`` subprocess. Used by ``messaging``, ``u1_floor``
and ``mcp_tools``; everything is stopped and removed when the :class:`Bench` closes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV_BIN = Path(sys.executable).parent
PYTHON = str(VENV_BIN / "python")
BRIDGE = str(VENV_BIN / "bridge")
NOOP_DIR = BENCH / "noop_plugin"

if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from bridgecli.localbroker import LocalNode  # noqa: E402  (no pika at import)


def clean_env() -> dict[str, str]:
    """os.environ minus PYTHONDONTWRITEBYTECODE: with it set (as in some dev shells) an
    editable checkout has no ``__pycache__`` and every ``bridge`` run recompiles its modules,
    which no installed copy ever does; the warm-up runs write the bytecode once."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def noop_site(root: Path) -> str:
    """A PYTHONPATH entry holding a ``.dist-info`` with the noop plugin's entry point, so the
    gateway finds it without installing anything into the shared venv."""
    site = root / "noop-site"
    info = site / "bridgecli_bench_noop-0.1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bridgecli-bench-noop\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[bridgecli]\nbench_noop = bridgecli_bench_noop\n")
    return f"{site}{os.pathsep}{NOOP_DIR}"


class Host:
    """One simulated host: own XDG dirs, host id and broker URI; its gateway as a subprocess."""

    def __init__(self, name: str, root: Path, broker_uri: str, extra_env: dict[str, str] | None = None) -> None:
        self.name = name
        self.root = root
        self.env = {k: v for k, v in clean_env().items() if not k.startswith(("BRIDGE_", "XDG_", "OCB_"))}
        for part in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
            path = root / part.lower()
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.env[f"XDG_{part}_{'DIR' if part == 'RUNTIME' else 'HOME'}"] = str(path)
        self.env.update({"BRIDGE_HOST_ID": name, "BRIDGE_BROKER_URI": broker_uri, **(extra_env or {})})
        self.gateway: subprocess.Popen | None = None
        self.log_path = root / "gateway.log"

    @property
    def socket(self) -> Path:
        return Path(self.env["XDG_RUNTIME_DIR"]) / "bridge" / "gateway.sock"

    @property
    def db(self) -> Path:
        return Path(self.env["XDG_STATE_HOME"]) / "bridge" / "gateway.db"

    def bridge(
        self, *args: str, input: str | None = None, env: dict[str, str] | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [BRIDGE, *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            input=input,
            timeout=300,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"bridge {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def register(self, label: str, deliver: str, role: str = "agent") -> str:
        """``bridge register`` as this host (direct path, before its gateway runs); the gid."""
        return self.bridge("register", "--label", label, "--role", role, "--deliver", deliver).stdout.strip()

    def start_gateway(self, argv: list[str] | None = None, timeout: float = 60) -> None:
        """Start ``bridge gateway`` (or ``argv``) and wait until its socket says connected."""
        with open(self.log_path, "ab") as log:
            self.gateway = subprocess.Popen(
                argv or [BRIDGE, "gateway"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        from bridgecli.gateway.client import ping

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.gateway.poll() is not None:
                raise RuntimeError(f"gateway {self.name} exited {self.gateway.returncode}: {self.log()}")
            status = ping(self.socket)
            if status and status["broker"]["connected"]:
                return
            time.sleep(0.1)
        raise RuntimeError(f"gateway {self.name} not connected after {timeout}s: {self.log()}")

    def stop_gateway(self) -> None:
        if self.gateway is not None and self.gateway.poll() is None:
            self.gateway.send_signal(signal.SIGTERM)
            try:
                self.gateway.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.gateway.pid, signal.SIGKILL)
                self.gateway.wait(10)
        self.gateway = None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""


class Bench:
    """Owns the private broker, the simulated hosts and the temp dir."""

    def __init__(self, quick: bool = False) -> None:
        self.quick = quick
        self.root = Path(tempfile.mkdtemp(prefix="bmsg", dir="/tmp"))
        self.node = LocalNode(self.root / "node")
        self.hosts: list[Host] = []

    def __enter__(self) -> Bench:
        self.node.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for host in self.hosts:
            host.stop_gateway()
        self.node.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def host(self, name: str, extra_env: dict[str, str] | None = None) -> Host:
        host_id = f"{name}-{uuid.uuid4().hex[:6]}"
        host = Host(host_id, self.root / host_id, self.node.uri, extra_env)
        self.hosts.append(host)
        return host

    def pika(self):
        """A fresh pika BlockingConnection to the private node (pika is imported here only)."""
        import pika

        return pika.BlockingConnection(pika.URLParameters(self.node.uri))
