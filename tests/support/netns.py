"""Hosts as Linux network namespaces: a broker, hostA and hostB on one private LAN.

Why namespaces: bridge is a cross-host design, and only separate network stacks prove
that nothing relies on a shared loopback, a shared Unix socket or a shared epmd. Layout::

    root ns   ip route add unreachable 10.213.N.0/24       <- added FIRST, removed LAST
    <p>-lan   br0 + v-broker, v-hostA, v-hostB (veth ends; down = partition)
    <p>-broker eth0 10.213.N.1   RabbitMQ (own epmd), listening on all its interfaces
    <p>-hostA  eth0 10.213.N.11  `bridge gateway`, own XDG dirs, BRIDGE_HOST_ID=hosta
    <p>-hostB  eth0 10.213.N.12  `bridge gateway`, own XDG dirs, BRIDGE_HOST_ID=hostb

Safety: the root namespace has a default route off the
machine, so a connect to a lab address *from the root namespace* would leave the VM. The
``unreachable`` route makes such a mistake fail locally. Nothing in the root namespace
connects to a lab address: commands run under ``ip netns exec``, and in-process AMQP clients
(:meth:`NetnsLab.in_ns`) run on a thread that first ``setns()``-es into a host namespace,
so their sockets belong to that host's network stack.

Every run gets its own namespace prefix (``bt<pid>``) and its own /24, so two suites on one
machine never collide; a record in /tmp lets a later run clean up after a run that was
SIGKILLed. Teardown always runs: gateways, the node, every process left in each namespace
(epmd included), the namespaces, the route.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bridgecli.localbroker import LocalNode, amqp_ready, pid_alive, rabbitmq_bin_dir
from tests.support.env import BRIDGE_BIN, make_home
from tests.support.gateway_check import GatewayWatch

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
SUBNET_BASE = "10.213"
HOST_OCTETS = {"broker": 1, "hostA": 11, "hostB": 12, "hostC": 13, "hostD": 14, "hostE": 15}
RECORD_DIR = Path(tempfile.gettempdir())
AMQP_PORT = 5672
_libc = ctypes.CDLL(None, use_errno=True)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def netns_supported() -> str | None:
    """None when this process may build namespaces, else why not (for pytest.skip)."""
    if os.geteuid() != 0:
        return "network namespace tests need root"
    return None  # a missing `ip` as root is a broken setup: fail loudly, do not skip


def _pick_subnet() -> str:
    """A 10.213.N.0/24 that no route of the root namespace uses yet."""
    routes = _ip("route", "show", "table", "all").stdout
    for n in list(range(os.getpid() % 200 + 20, 250)) + list(range(20, 250)):
        subnet = f"{SUBNET_BASE}.{n}.0/24"
        if subnet not in routes and f"{SUBNET_BASE}.{n}." not in routes:
            return subnet
    raise RuntimeError("no free 10.213.N.0/24 subnet for the netns lab")


def cleanup_stale() -> None:
    """Remove what a SIGKILLed earlier run left: its namespaces (and their processes) and
    its unreachable route, found through the record file named after its pid."""
    for record in RECORD_DIR.glob("bridge-netns-*.json"):
        try:
            data = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        if pid_alive(int(data.get("owner", 0))):
            continue
        for ns in data.get("namespaces", []):
            _kill_ns_processes(ns)
            _ip("netns", "del", ns, check=False)
        if data.get("subnet"):
            _ip("route", "del", "unreachable", data["subnet"], check=False)
        record.unlink(missing_ok=True)


def ns_pids(ns: str) -> list[int]:
    """Pids of every process living in namespace ``ns``."""
    result = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in result.stdout.split() if p.isdigit()]


def _kill_ns_processes(ns: str, grace: float = 5.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = ns_pids(ns)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
            time.sleep(0.1)


def run_in_netns(ns: str, fn: Callable[[], T], timeout: float = 120.0) -> T:
    """Run ``fn`` on a fresh thread that has joined network namespace ``ns`` first.

    ``setns(CLONE_NEWNET)`` is per thread, and a socket keeps the namespace it was created
    in, so an in-process pika client made here speaks from that host's stack (and a failed
    setns raises instead of silently using the root namespace).
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({ns}): {os.strerror(err)}")
            finally:
                os.close(fd)
            box["value"] = fn()
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"netns-{ns}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"work in namespace {ns} did not finish in {timeout:g}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class NetnsNode(LocalNode):
    """A :class:`LocalNode` whose processes live in network namespace ``ns``.

    Fixed ports (the namespace is ours alone), a listener on every interface of the
    namespace, ``loopback_users = none`` so guest may log in from other hosts, and the CLI
    tools run inside the namespace too (they reach the node through the namespace's epmd).
    """

    def __init__(self, base: Path, ns: str, extra_conf: Sequence[str] = ()) -> None:
        super().__init__(base, nodename="rabbit@localhost", amqp_port=AMQP_PORT, dist_port=25672, extra_conf=extra_conf)
        self.ns = ns

    def _pick_ports(self) -> None:  # the namespace's ports are all free
        return

    def _write_files(self) -> None:
        super()._write_files()
        conf = self.base / "rabbitmq.conf"
        lines = conf.read_text().splitlines()
        lines[0] = f"listeners.tcp.default = {AMQP_PORT}"
        if "loopback_users = none" not in lines:
            lines.append("loopback_users = none")
        conf.write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 90.0) -> None:
        bin_dir = rabbitmq_bin_dir()
        if self.process is not None and self.process.poll() is None:
            return
        self._write_files()
        self.pid_file.unlink(missing_ok=True)
        with self.stdout_file.open("ab") as out:
            self.process = subprocess.Popen(
                ["ip", "netns", "exec", self.ns, str(bin_dir / "rabbitmq-server")],
                env=self.env(),
                cwd=self.base,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pgid = self.process.pid
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not run_in_netns(self.ns, lambda: amqp_ready("127.0.0.1", AMQP_PORT, 1.0)):
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"RabbitMQ in {self.ns} exited: {self.log_tail(5)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"RabbitMQ in {self.ns} not ready in {timeout:g}s: {self.log_tail(5)}")
            time.sleep(0.2)

    def ctl(
        self, *args: str, check: bool = True, timeout: float = 60.0, tool: str = "rabbitmqctl"
    ) -> subprocess.CompletedProcess:
        cmd = ["ip", "netns", "exec", self.ns, str(rabbitmq_bin_dir() / tool), "-n", self.nodename, *args]
        result = subprocess.run(
            cmd,
            env=self.env(),
            cwd=self.base,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)}: {(result.stderr or result.stdout).strip()[-500:]}")
        return result

    def kill9(self) -> None:
        """SIGKILL the whole node (a crash, not a shutdown)."""
        if self.pgid:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.process is not None:
            self.process.wait(timeout=10)
            self.process = None


@dataclass
class Host:
    """One namespace host: its namespace, address, bridge environment and gateway."""

    name: str  # hostA
    ns: str  # bt1234-hostA
    addr: str
    home: Any  # tests.support.env.BridgeHome
    gateway: subprocess.Popen | None = None
    gateway_log: Path | None = None
    gateway_starts: int = 0
    watch: GatewayWatch = field(init=False)

    def __post_init__(self) -> None:
        self.watch = GatewayWatch(self.name)

    @property
    def host_id(self) -> str:
        return self.name.lower()

    @property
    def env(self) -> dict[str, str]:
        return self.home.env


@dataclass
class NetnsLab:
    """The namespaces, the broker node and the per-host gateways of one test run."""

    root: Path
    hosts: tuple[str, ...] = ("hostA", "hostB")
    broker_conf: Sequence[str] = ()
    #: False: the broker namespace gets no node of ours (a test starts `bridge hub` there)
    start_broker: bool = True
    prefix: str = field(default_factory=lambda: f"bt{os.getpid()}")
    subnet: str = ""
    members: dict[str, Host] = field(default_factory=dict)
    broker: NetnsNode | None = None
    _namespaces: list[str] = field(default_factory=list)
    _record: Path | None = None

    # --- building -----------------------------------------------------------------------
    def ns(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def addr(self, name: str) -> str:
        return self.subnet.rsplit(".", 1)[0] + f".{HOST_OCTETS[name]}"

    @property
    def broker_addr(self) -> str:
        return self.addr("broker")

    def broker_uri(self, user: str = "guest", password: str = "guest") -> str:
        return f"amqp://{user}:{password}@{self.broker_addr}:{AMQP_PORT}/"

    def _save_record(self) -> None:
        assert self._record is not None
        self._record.write_text(
            json.dumps({"owner": os.getpid(), "subnet": self.subnet, "namespaces": self._namespaces})
        )

    def setup(self) -> None:
        """Route first, then namespaces, links, the broker node; gateways start on demand."""
        cleanup_stale()
        self.subnet = _pick_subnet()
        self._record = RECORD_DIR / f"bridge-netns-{os.getpid()}-{self.prefix}.json"
        _ip("route", "add", "unreachable", self.subnet)
        self._save_record()
        lan = self.ns("lan")
        self._add_ns(lan)
        _ip("-n", lan, "link", "add", "br0", "type", "bridge")
        _ip("-n", lan, "link", "set", "br0", "up")
        for name in ("broker", *self.hosts):
            ns = self.ns(name)
            self._add_ns(ns)
            _ip("-n", lan, "link", "add", f"v-{name}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", lan, "link", "set", f"v-{name}", "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{self.addr(name)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            if name != "broker":
                home = make_home(self.root / name)
                home.env.update(
                    {
                        "BRIDGE_HOST_ID": name.lower(),
                        "BRIDGE_BROKER_URI": self.broker_uri(),
                        "BRIDGE_ROSTER_INTERVAL": "1",
                        "BRIDGE_BROKER_HEARTBEAT": "2",
                    }
                )
                self.members[name] = Host(name, ns, self.addr(name), home)
        if self.start_broker:
            self.broker = NetnsNode(self.root / "broker", self.ns("broker"), self.broker_conf)
            self.broker.start()

    def _add_ns(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self._namespaces.append(ns)
        self._save_record()

    def teardown(self) -> list[str]:
        """Run the gateways' teardown check (:meth:`check_gateways`, with SIGTERM), then stop
        everything we started, in reverse; never raises, always drops the route. Returns the
        check's failure messages, for the fixture to fail with once all is cleaned up."""
        try:
            failures = self.check_gateways(stop=True)
        except Exception as exc:  # the cleanup below must run whatever the check hit
            failures = [f"gateway teardown check failed: {type(exc).__name__}: {exc}"]
        problems: list[str] = []
        for host in self.members.values():
            try:
                self.stop_gateway(host.name)
            except Exception as exc:
                problems.append(f"gateway {host.name}: {exc}")
        if self.broker is not None:
            try:
                self.broker.stop(timeout=20)
            except Exception as exc:
                problems.append(f"broker: {exc}")
        for ns in reversed(self._namespaces):
            _kill_ns_processes(ns)  # epmd and anything that escaped
            _ip("netns", "del", ns, check=False)
        if self.subnet:
            _ip("route", "del", "unreachable", self.subnet, check=False)
        if self._record is not None:
            self._record.unlink(missing_ok=True)
        if problems:
            print("netns teardown problems:", "; ".join(problems))
        return failures

    # --- running things in hosts --------------------------------------------------------
    def add_member(self, alias: str, of: str, env: dict[str, str]) -> Host:
        """A second bridge "installation" in host ``of``'s namespace: own XDG dirs and
        ``env`` (e.g. another host id and broker user), its own gateway."""
        base = self.members[of]
        home = make_home(self.root / alias)
        home.env.update({k: v for k, v in base.env.items() if k.startswith("BRIDGE_")})
        home.env.update(env)
        self.members[alias] = Host(alias, base.ns, base.addr, home)
        return self.members[alias]

    def host(self, name: str) -> Host:
        return self.members[name]

    def bridge(
        self,
        name: str,
        *args: str,
        env: dict[str, str] | None = None,
        timeout: float = 120,
        input: str | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess:
        """Run ``bridge ARGS`` inside host ``name`` with that host's environment."""
        host = self.members[name]
        result = subprocess.run(
            ["ip", "netns", "exec", host.ns, BRIDGE_BIN, *args],
            env={**host.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"[{name}] bridge {' '.join(args)} exited {result.returncode}: {result.stderr.strip()[-800:]}"
            )
        return result

    def bridge_json(self, name: str, *args: str, **kwargs: Any) -> Any:
        return json.loads(self.bridge(name, *args, "--json", **kwargs).stdout)

    def start_gateway(self, name: str, env: dict[str, str] | None = None, timeout: float = 60.0) -> Host:
        """Start ``bridge gateway`` in host ``name`` and wait until it is connected."""
        host = self.members[name]
        assert host.gateway is None or host.gateway.poll() is not None, f"gateway {name} already running"
        crashed = host.watch.dead_unnoticed(host.gateway)
        assert crashed is None, host.watch.report([crashed], self.gateway_text(name))
        host.gateway_starts += 1
        host.gateway_log = host.home.root / f"gateway-{host.gateway_starts}.log"
        with host.gateway_log.open("wb") as log:
            host.gateway = subprocess.Popen(
                ["ip", "netns", "exec", host.ns, BRIDGE_BIN, "gateway"],
                env={**host.env, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.wait_log(name, "connected to broker", timeout)
        return host

    def gateway_text(self, name: str) -> str:
        host = self.members[name]
        if host.gateway_log is None or not host.gateway_log.exists():
            return ""
        return host.gateway_log.read_text(errors="replace")

    def wait_log(self, name: str, needle: str, timeout: float = 60.0, after: int = 0) -> float:
        """Wait until the current gateway log of ``name`` contains ``needle`` past offset
        ``after``; returns the monotonic time it was seen."""
        host = self.members[name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.gateway_text(name)[after:]:
                return time.monotonic()
            if host.gateway is not None and host.gateway.poll() is not None:
                raise AssertionError(
                    f"gateway {name} exited {host.gateway.returncode}: {self.gateway_text(name)[-1500:]}"
                )
            time.sleep(0.1)
        raise AssertionError(f"gateway {name}: no {needle!r} in {timeout:g}s: {self.gateway_text(name)[-1500:]}")

    def stop_gateway(self, name: str, sig: int = signal.SIGTERM) -> None:
        """Stop host ``name``'s gateway (``SIGKILL`` for a crash) on purpose, so the teardown
        check leaves it out (its log is still checked); waits until it is gone."""
        host = self.members[name]
        proc, host.gateway = host.gateway, None
        if proc is None:
            return
        host.watch.end(proc)
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def expect_log_errors(self, name: str, pattern: str) -> None:
        """Declare that host ``name``'s gateways log error lines matching regex ``pattern``
        before the next teardown check (which fails on other error lines, and on a pattern
        never matched)."""
        self.members[name].watch.expect_errors(pattern)

    def check_gateways(self, names: Sequence[str] | None = None, stop: bool = False) -> list[str]:
        """The teardown check of the gateways of ``names`` (every member by default), see
        :meth:`GatewayWatch.check_stretch`: one failure message per host with problems."""
        failures = []
        for name in names or list(self.members):
            host = self.members[name]
            logs = [host.home.root / f"gateway-{n}.log" for n in range(1, host.gateway_starts + 1)]
            failure = host.watch.check_stretch(host.gateway, logs, stop)
            if failure:
                failures.append(failure)
        return failures

    def in_ns(self, name: str, fn: Callable[[], T], timeout: float = 120.0) -> T:
        """Run ``fn`` in-process from host ``name``'s network stack (see :func:`run_in_netns`)."""
        return run_in_netns(self.ns(name), fn, timeout)

    # --- faults -------------------------------------------------------------------------
    def partition(self, name: str) -> None:
        """Cut host ``name`` off the LAN (its veth end on the bridge goes down)."""
        _ip("-n", self.ns("lan"), "link", "set", f"v-{name}", "down")

    def heal(self, name: str) -> None:
        _ip("-n", self.ns("lan"), "link", "set", f"v-{name}", "up")

    def queue_depths(self) -> dict[str, int]:
        """``rabbitmqctl list_queues`` as {name: ready messages} (run inside the broker ns)."""
        assert self.broker is not None
        out = self.broker.ctl("list_queues", "name", "messages", "-q", "--no-table-headers").stdout
        depths = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                depths[parts[0]] = int(parts[1])
        return depths


def lab_leftovers(prefix: str) -> list[str]:
    """Namespaces with ``prefix`` that still exist (empty after a clean teardown)."""
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix + "-")]


@pytest.fixture(scope="session")
def netns_lab() -> Iterator[NetnsLab]:
    """broker + hostA + hostB namespaces with a RabbitMQ node in the broker namespace.

    Gateways are not started here: tests (or module fixtures) start them with
    ``lab.start_gateway("hostA")`` and stop them in their teardown. At the end, every gateway
    gets the teardown check (:meth:`NetnsLab.check_gateways`). Skips only when not root.
    """
    reason = netns_supported()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="bns", dir="/tmp"))
    lab = NetnsLab(root)
    failures: list[str] = []
    try:
        lab.setup()
        yield lab
    finally:
        failures = lab.teardown()
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
