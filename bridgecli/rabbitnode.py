"""A RabbitMQ node run as a plain process, every file under one directory.

The recipe: Debian's real scripts in
``/usr/lib/rabbitmq/bin`` (the ``/usr/sbin`` wrappers ``su`` to the ``rabbitmq`` user), an own
``HOME`` so the Erlang cookie is private, every ``RABBITMQ_*`` path pointed into the node's
directory and an empty ``RABBITMQ_CONF_ENV_FILE`` so ``/etc/rabbitmq`` cannot leak in.
:class:`LocalNode` is used by the embedded broker (:mod:`bridgecli.localbroker`) and by the
test fixtures. No pika here: readiness is an AMQP protocol-header handshake on a raw socket.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bridgecli import paths
from bridgecli.errors import BridgeError, BrokerUnavailable, MissingDependency, Timeout

#: Where Debian installs the real (non-``su``) scripts; ``BRIDGE_RABBITMQ_BIN`` overrides it.
DEFAULT_BIN = "/usr/lib/rabbitmq/bin"
DEFAULT_AMQP_PORT = 5672
DEFAULT_DIST_PORT = 25672
INSTALL_HINT = "install it with `apt-get install rabbitmq-server` (Debian/Ubuntu)"
#: the AMQP 0-9-1 protocol header a client sends first; a ready broker answers with
#: a Connection.Start method frame (frame type 1)
_AMQP_HEADER = b"AMQP\x00\x00\x09\x01"


def rabbitmq_bin_dir() -> Path:
    """Directory of ``rabbitmq-server`` and ``rabbitmqctl``; raise MissingDependency when absent."""
    bin_dir = Path(os.environ.get("BRIDGE_RABBITMQ_BIN") or DEFAULT_BIN)
    if not (bin_dir / "rabbitmq-server").is_file():
        raise MissingDependency(f"rabbitmq-server is not installed (no {bin_dir}/rabbitmq-server)", INSTALL_HINT)
    return bin_dir


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on ``host:port`` and we could bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # like the Erlang listener: connections in TIME_WAIT do not make a port "taken"
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(avoid: Iterable[int] = ()) -> int:
    """A currently free TCP port in 20000-32000.

    Not the kernel's ephemeral range (32768+), so an outgoing connection cannot grab it
    between our check and the node's bind; and well below 65535 - 10000 for Erlang's CLI.
    """
    avoid = set(avoid)
    rng = random.Random()
    for _ in range(200):
        port = rng.randint(20000, 32000)
        if port not in avoid and port_is_free(port):
            return port
    raise BrokerUnavailable("found no free TCP port for the broker", "free some ports and retry")


def amqp_ready(host: str, port: int, timeout: float = 1.0, *, expect: bytes | None = None) -> bool:
    """True when ``host:port`` answers the AMQP 0-9-1 header with a Connection.Start frame
    (and, with ``expect``, that frame's server properties contain those bytes).

    A bare open port is not enough: an unrelated service might hold it, or another broker
    might (``expect`` = our node's name, which RabbitMQ reports as ``cluster_name``).
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_AMQP_HEADER)
            frame = b""
            while len(frame) < 7 or len(frame) < 8 + int.from_bytes(frame[3:7], "big"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                frame += chunk
    except OSError:
        return False
    if len(frame) < 7 or frame[0] != 1:
        return False
    return expect is None or expect in frame


def pid_alive(pid: int | None) -> bool:
    """True when process ``pid`` exists (and is not a zombie)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def group_alive(pgid: int | None) -> bool:
    """True when any process of process group ``pgid`` is left (zombies excluded)."""
    if not pgid:
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


@dataclass
class NodeInfo:
    """What ``state.json`` records about a running node."""

    uri: str
    pid: int  # the Erlang VM (beam.smp)
    pgid: int  # the process group we started: script, VM, erl_child_setup, inet_gethost
    nodename: str
    amqp_port: int
    dist_port: int
    base: str
    started: float
    management_port: int = 0  # 0: management is off


class LocalNode:
    """One RabbitMQ node whose every file lives under ``base``.

    ``amqp_port``/``dist_port`` of ``None`` mean "pick free ports at start". Extra
    ``rabbitmq.conf`` lines (e.g. ``consumer_timeout = 5000``) go in ``extra_conf``.
    Management is off by default: it adds ~5 s to every stop.
    """

    def __init__(
        self,
        base: Path,
        *,
        nodename: str | None = None,
        amqp_port: int | None = None,
        dist_port: int | None = None,
        extra_conf: Sequence[str] = (),
        management: bool = False,
        management_port: int | None = None,
    ) -> None:
        self.base = Path(base)
        self.nodename = nodename or default_nodename(self.base)
        self.amqp_port = amqp_port
        self.dist_port = dist_port
        self.extra_conf = list(extra_conf)
        self.management = management
        self.management_port = management_port
        self.process: subprocess.Popen | None = None
        self.pgid: int | None = None

    # --- files -------------------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def pid_file(self) -> Path:
        return self.base / "rabbitmq.pid"

    @property
    def log_dir(self) -> Path:
        return self.base / "log"

    @property
    def log_file(self) -> Path:
        """The node's own log (boot, connections, errors)."""
        return self.log_dir / f"{self.nodename}.log"

    @property
    def stdout_file(self) -> Path:
        """Output of the start script (early boot failures land here, not in the log)."""
        return self.base / "stdout.log"

    @property
    def uri(self) -> str:
        if self.amqp_port is None:
            raise BrokerUnavailable("the node has no port yet", "start it first")
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/"

    @property
    def port(self) -> int:
        if self.amqp_port is None:
            raise BrokerUnavailable("the node has no port yet", "start it first")
        return self.amqp_port

    def env(self) -> dict[str, str]:
        """The environment for the node and for its CLI tools (same HOME = same cookie)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.update(
            {
                "HOME": str(self.home),
                "RABBITMQ_NODENAME": self.nodename,
                "RABBITMQ_MNESIA_BASE": str(self.base / "mnesia"),
                "RABBITMQ_LOG_BASE": str(self.log_dir),
                "RABBITMQ_PID_FILE": str(self.pid_file),
                "RABBITMQ_CONFIG_FILE": str(self.base / "rabbitmq"),  # ".conf" is appended
                "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.base / "advanced.config"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.base / "enabled_plugins"),
                "RABBITMQ_CONF_ENV_FILE": str(self.base / "env.conf"),
            }
        )
        if self.amqp_port is not None:
            env["RABBITMQ_NODE_PORT"] = str(self.amqp_port)
        if self.dist_port is not None:
            env["RABBITMQ_DIST_PORT"] = str(self.dist_port)
        return env

    def _write_files(self) -> None:
        for sub in (self.base, self.home, self.base / "mnesia", self.log_dir):
            paths.ensure_private_dir(sub)
        (self.base / "env.conf").write_text("")  # shadows /etc/rabbitmq/rabbitmq-env.conf
        lines = [f"listeners.tcp.default = 127.0.0.1:{self.amqp_port}"]
        plugins = "[]."
        if self.management:
            lines.append(f"management.tcp.port = {self.management_port}")
            lines.append("management.tcp.ip = 127.0.0.1")
            plugins = "[rabbitmq_management]."
        lines.extend(self.extra_conf)
        (self.base / "rabbitmq.conf").write_text("\n".join(lines) + "\n")
        (self.base / "enabled_plugins").write_text(plugins + "\n")

    def _pick_ports(self) -> None:
        taken: set[int] = set()
        if self.amqp_port is None or not port_is_free(self.amqp_port):
            self.amqp_port = free_port()
        taken.add(self.amqp_port)
        if self.dist_port is None or self.dist_port in taken or not port_is_free(self.dist_port):
            self.dist_port = free_port(taken)
        taken.add(self.dist_port)
        if self.management and (self.management_port is None or not port_is_free(self.management_port)):
            self.management_port = free_port(taken)

    # --- lifecycle ---------------------------------------------------------------------
    def start(self, timeout: float = 90.0, *, keep_ports: bool = False) -> None:
        """Launch the node and return once it accepts AMQP connections.

        Ports that are unset or taken are replaced by free ones, unless ``keep_ports``
        (a restart must come back on the same URI). Raises BrokerUnavailable (with the tail
        of the log) if the node exits during boot, and Timeout if it is not ready in
        ``timeout`` seconds.
        """
        bin_dir = rabbitmq_bin_dir()
        if self.process is not None and self.process.poll() is None:
            return
        keep = bool(keep_ports and self.amqp_port and self.dist_port)
        # Another process can grab a port between our probe and the node's bind (a shared
        # machine, parallel test suites): with chosen-by-us ports, retry on fresh ones.
        attempts = 1 if keep else 3
        for attempt in range(attempts):
            if not keep:
                self._pick_ports()
            offset = self._launch(bin_dir)
            try:
                self.wait_ready(timeout)
                return
            except BrokerUnavailable:
                if not self._port_clash(offset):
                    raise
                if attempt == attempts - 1:
                    raise BrokerUnavailable(
                        f"RabbitMQ node {self.nodename} could not listen on 127.0.0.1:"
                        f"{self.amqp_port}: the port is in use",
                        "stop what uses it (see `ss -ltnp`) and start again",
                    ) from None
                self.amqp_port = self.dist_port = None

    def _launch(self, bin_dir: Path) -> int:
        """Write the config and spawn the node; returns the stdout log offset of this run."""
        self._write_files()
        self.pid_file.unlink(missing_ok=True)
        with self.stdout_file.open("ab") as out:
            offset = out.tell()
            # A new session = a new process group we can signal as a whole at stop, and a
            # node that survives the `bridge broker start` process exiting.
            self.process = subprocess.Popen(
                [str(bin_dir / "rabbitmq-server")],
                env=self.env(),
                cwd=self.base,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pgid = self.process.pid
        return offset

    def _port_clash(self, offset: int) -> bool:
        """Did the run whose output starts at ``offset`` die because a port was taken?"""
        try:
            with self.stdout_file.open("rb") as handle:
                handle.seek(offset)
                return b"eaddrinuse" in handle.read()
        except OSError:
            return False

    def wait_ready(self, timeout: float) -> None:
        """Poll until the node answers AMQP; fail fast if its process has gone."""
        deadline = time.monotonic() + timeout
        while True:
            # Ready = *our* VM is alive (its pid file written) and the port speaks AMQP; a
            # port answering while our node died would be somebody else's broker.
            if (
                pid_alive(self.vm_pid)
                and amqp_ready("127.0.0.1", self.port, expect=self._identity)
                and (self.process is None or self.process.poll() is None)
            ):
                return
            if self.process is not None and self.process.poll() is not None:
                raise BrokerUnavailable(
                    f"RabbitMQ node {self.nodename} exited during start-up "
                    f"(code {self.process.returncode}): {self.log_tail(3)}",
                    f"see {self.stdout_file} and {self.log_file}",
                )
            if time.monotonic() > deadline:
                self.stop()
                raise Timeout(
                    f"RabbitMQ node {self.nodename} did not accept AMQP connections within {timeout:g}s",
                    f"see {self.log_file}",
                )
            time.sleep(0.2)

    @property
    def _identity(self) -> bytes:
        """What our node puts in its Connection.Start (``cluster_name`` = ``NAME@hostname``)."""
        return (self.nodename.split("@", 1)[0] + "@").encode()

    @property
    def vm_pid(self) -> int | None:
        """Pid of the Erlang VM, from the node's pid file."""
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def is_running(self) -> bool:
        return pid_alive(self.vm_pid) or (self.process is not None and self.process.poll() is None)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the node: SIGTERM to the VM (a clean RabbitMQ shutdown), then the whole
        process group, SIGKILL after ``timeout``. Idempotent. epmd is left alone here: it
        is shared by every Erlang node on the machine (see :func:`stop_epmd_if_idle`)."""
        stop_processes(self.vm_pid, self.pgid, timeout)
        if self.process is not None:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self.process = None

    def restart(self, timeout: float = 90.0) -> None:
        """Stop and start again on the same ports (clients reconnect to the same URI)."""
        self.stop()
        self.start(timeout, keep_ports=True)

    def ctl(
        self, *args: str, check: bool = True, timeout: float = 60.0, tool: str = "rabbitmqctl"
    ) -> subprocess.CompletedProcess:
        """Run ``rabbitmqctl -n NODE ARGS`` (or another CLI ``tool``) with this node's cookie.

        Each call costs ~0.5 s (an Elixir escript start). ``check`` raises BridgeError with
        the tool's stderr on a non-zero exit.
        """
        cmd = [str(rabbitmq_bin_dir() / tool), "-n", self.nodename, *args]
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
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise BridgeError(f"{tool} {' '.join(args)} failed: {' '.join(detail[-3:])}", f"see {self.log_file}")
        return result

    def consumer_timeout_ms(self) -> int | None:
        """The node's effective ``consumer_timeout`` in ms (None: disabled/unknown)."""
        result = self.ctl("eval", "application:get_env(rabbit, consumer_timeout).", check=False)
        text = result.stdout.strip()
        if text.startswith("{ok,"):
            value = text[4:].rstrip("}").strip()
            return int(value) if value.isdigit() else None
        return None

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the node log (or of the start script's output)."""
        for path in (self.log_file, self.stdout_file):
            try:
                text = path.read_text(errors="replace").strip()
            except OSError:
                continue
            if text:
                return " | ".join(text.splitlines()[-lines:])
        return "(no log output)"

    def info(self) -> NodeInfo:
        return NodeInfo(
            uri=self.uri,
            pid=self.vm_pid or 0,
            pgid=self.pgid or 0,
            nodename=self.nodename,
            amqp_port=self.port,
            dist_port=self.dist_port or 0,
            base=str(self.base),
            started=time.time(),
            management_port=(self.management_port or 0) if self.management else 0,
        )


def stop_processes(vm_pid: int | None, pgid: int | None, timeout: float) -> None:
    """TERM the VM, wait for the group to empty, then TERM/KILL what is left of it.

    Without a live VM pid (no pid file yet: the node is still booting) the group is
    signalled at once instead of waiting ``timeout`` for nothing.
    """
    if pid_alive(vm_pid):
        try:
            os.kill(vm_pid, signal.SIGTERM)  # type: ignore[arg-type]
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (pid_alive(vm_pid) or group_alive(pgid)):
            time.sleep(0.1)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not group_alive(pgid):
            break
        try:
            os.killpg(pgid, sig)  # type: ignore[arg-type]
        except ProcessLookupError:
            break
        end = time.monotonic() + 5
        while time.monotonic() < end and group_alive(pgid):
            time.sleep(0.1)


def epmd_names() -> list[str] | None:
    """Node names registered with the local epmd; None when no epmd runs."""
    try:
        result = subprocess.run(["epmd", "-names"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0 or "up and running" not in result.stdout:
        return None
    return [line.split()[1] for line in result.stdout.splitlines() if line.startswith("name ")]


def stop_epmd_if_idle() -> bool:
    """Stop epmd when no node is registered with it (it is shared machine-wide, so a node
    of another user or broker keeps it alive). Returns whether epmd was stopped."""
    names = epmd_names()
    if names is None or names:
        return False
    subprocess.run(["epmd", "-kill"], capture_output=True, timeout=10)
    return True


def default_nodename(base: Path) -> str:
    """``bridge-<hash>@localhost``: unique per data dir, so two users or two XDG-isolated
    "hosts" on one machine never collide in epmd."""
    digest = hashlib.sha256(str(Path(base).resolve()).encode()).hexdigest()[:10]
    return f"bridge-{digest}@localhost"
