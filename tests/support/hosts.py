"""Simulated hosts on one machine: isolated XDG dirs + BRIDGE_HOST_ID + BRIDGE_BROKER_URI,
with a real ``bridge gateway`` subprocess each.

``host_factory("a")`` gives a :class:`Host`; ``host.bridge("send", ...)`` runs the real CLI
as that host; ``host.start_gateway()`` starts its gateway and waits until it is connected.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.env import BRIDGE_BIN, make_home
from tests.support.gateway_check import GatewayWatch, terminate

#: the repository root: where a ``command`` gateway runs, so ``python -m tests.support...`` imports
ROOT = Path(__file__).resolve().parents[2]


class Host:
    """One simulated host."""

    def __init__(self, name: str, root: Path, broker_uri: str, extra_env: dict[str, str] | None = None) -> None:
        self.name = name
        self.home = make_home(root)
        self.env = dict(self.home.env)
        self.env.update({"BRIDGE_HOST_ID": name, "BRIDGE_BROKER_URI": broker_uri})
        self.env.update(extra_env or {})
        self.gateway: subprocess.Popen | None = None
        self.log_path = root / "gateway.log"
        self._log = None
        self.watch = GatewayWatch(name)

    @property
    def root(self) -> Path:
        return self.home.root

    @property
    def socket(self) -> Path:
        return Path(self.env["XDG_RUNTIME_DIR"]) / "bridge" / "gateway.sock"

    def write_config(self, text: str) -> None:
        self.home.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.home.config_file.write_text(text)

    def bridge(
        self,
        *args: str,
        input: str | None = None,
        timeout: float = 60,
        check: bool = False,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``bridge ARGS`` as this host."""
        proc = subprocess.run(
            [BRIDGE_BIN, *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"bridge {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
        return proc

    def bridge_json(self, *args: str, **kwargs) -> dict:
        proc = self.bridge(*args, "--json", check=True, **kwargs)
        return json.loads(proc.stdout)

    def waiting(self, gid: str) -> bool:
        """Whether a ``poll --wait`` or ``send --wait`` of ``gid`` waits in this host's gateway."""
        return any(e["gid"] == gid and e["waiting"] for e in self.bridge_json("status")["entities"])

    def register(self, label: str, deliver: str = "hold", role: str = "agent") -> str:
        proc = self.bridge("register", "--label", label, "--role", role, "--deliver", deliver, check=True)
        return proc.stdout.strip()

    def start_gateway(
        self, timeout: float = 30, command: list[str] | None = None, env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        """Start ``bridge gateway`` (or ``command``, e.g. a fault-injecting wrapper, with this
        host's environment plus ``env``) and wait until its status says it is connected."""
        assert self.gateway is None or self.gateway.poll() is not None, "gateway already running"
        crashed = self.watch.dead_unnoticed(self.gateway)
        assert crashed is None, self.watch.report([crashed], self.log())
        if self._log is not None:
            self._log.close()
        self._log = open(self.log_path, "ab")
        self.gateway = subprocess.Popen(
            command or [BRIDGE_BIN, "gateway"],
            env={**self.env, **(env or {})},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=ROOT if command else None,
        )
        self.wait_connected(timeout)
        return self.gateway

    def wait_connected(self, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.gateway is not None and self.gateway.poll() is not None:
                raise AssertionError(f"gateway of {self.name} exited {self.gateway.returncode}:\n{self.log()}")
            proc = self.bridge("status", "--json", timeout=15)
            if proc.returncode == 0:
                status = json.loads(proc.stdout)
                if status["broker"]["connected"]:
                    return status
            last = proc.stderr
            time.sleep(0.2)
        raise AssertionError(f"gateway of {self.name} not connected after {timeout}s: {last}\n{self.log()}")

    def stop_gateway(self, timeout: float = 20) -> int | None:
        """SIGTERM and wait (a clean stop, on purpose: the teardown check leaves it out)."""
        if self.gateway is None or self.gateway.poll() is not None:
            return None if self.gateway is None else self.gateway.returncode
        self.watch.end(self.gateway)
        code = terminate(self.gateway, timeout)
        if code is None:
            raise AssertionError(f"gateway of {self.name} did not stop on SIGTERM:\n{self.log()}")
        return code

    def kill_gateway(self) -> None:
        """kill -9, no chance to clean up (on purpose: the teardown check leaves it out)."""
        if self.gateway is not None and self.gateway.poll() is None:
            self.watch.end(self.gateway)
            os.killpg(self.gateway.pid, signal.SIGKILL)
            self.gateway.wait(10)

    def wait_gateway_exit(self, timeout: float = 30) -> int:
        """Wait until the gateway exits by itself (a crash the test injects) and return its
        exit code; the teardown check leaves that gateway out."""
        assert self.gateway is not None, f"no gateway started on {self.name}"
        self.watch.end(self.gateway)
        return self.gateway.wait(timeout)

    def expect_log_errors(self, pattern: str) -> None:
        """Declare that the gateway logs error lines matching regex ``pattern`` in this test
        (the teardown check fails on any other error line, and on a pattern never matched)."""
        self.watch.expect_errors(pattern)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except FileNotFoundError:
            return ""

    def whole_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def check_gateway(self) -> str | None:
        """The teardown check (see tests/support/gateway_check.py): stops a live gateway with
        SIGTERM; the failure message (problems and log tail), or None when all is well."""
        problems = self.watch.problems(self.gateway, self.whole_log)
        return self.watch.report(problems, self.whole_log()) if problems else None

    def close(self) -> None:
        """Stop the gateway if it still runs (no checks) and release the log file."""
        if self.gateway is not None and self.gateway.poll() is None:
            terminate(self.gateway, 20)
        if self._log is not None:
            self._log.close()
            self._log = None


def close_checked(hosts: list[Host]) -> None:
    """Run the teardown check of every host, close them all, then fail with every message."""
    failures = []
    for host in hosts:
        try:
            failure = host.check_gateway()
            if failure:
                failures.append(failure)
        finally:
            host.close()
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


@pytest.fixture
def host_factory(rabbitmq) -> Iterator[Callable[..., Host]]:
    """Make simulated hosts on the session broker: ``host_factory("a")``. After the test
    each host's gateway gets the teardown check (tests/support/gateway_check.py: alive,
    exits 0 on SIGTERM, no undeclared error in its log); then directories are removed."""
    hosts: list[Host] = []

    def make(name: str, broker_uri: str | None = None, extra_env: dict[str, str] | None = None) -> Host:
        # a unique host id per test: control.<host> queues are durable on the shared broker
        host_id = f"{name}-{uuid.uuid4().hex[:6]}"
        root = Path(tempfile.mkdtemp(prefix=f"h{name[:6]}", dir="/tmp"))
        host = Host(host_id, root, broker_uri or rabbitmq.uri, extra_env)
        hosts.append(host)
        return host

    yield make
    try:
        close_checked(hosts)
    finally:
        for host in hosts:
            shutil.rmtree(host.root, ignore_errors=True)
