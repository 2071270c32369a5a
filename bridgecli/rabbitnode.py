"""A RabbitMQ node run as a plain process, every file under one directory.

Debian's real scripts in ``/usr/lib/rabbitmq/bin`` (the ``/usr/sbin`` wrappers ``su`` to the
``rabbitmq`` user), an own ``HOME`` so the Erlang cookie is private, every ``RABBITMQ_*`` path
inside the node's directory, and an empty ``RABBITMQ_CONF_ENV_FILE`` so ``/etc/rabbitmq``
cannot leak in. Used by the embedded broker and the test fixtures. A node given a
``host_user`` is *secured* (:mod:`bridgecli.nodeusers`): no ``guest``, epmd and the Erlang
distribution on loopback, every file private, so no other local user can log in or join it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from bridgecli import paths
from bridgecli.errors import BridgeError, BrokerUnavailable, MissingDependency, Timeout
from bridgecli.nodeprocess import (
    amqp_ready,
    free_port,
    pid_alive,
    port_is_free,
    stop_processes,
)
from bridgecli.nodeusers import GUEST, NodeUsers, new_password, write_private_json

#: Where Debian installs the real (non-``su``) scripts; ``BRIDGE_RABBITMQ_BIN`` overrides it.
DEFAULT_BIN = "/usr/lib/rabbitmq/bin"
DEFAULT_AMQP_PORT = 5672
DEFAULT_DIST_PORT = 25672
INSTALL_HINT = "install it with `apt-get install rabbitmq-server` (Debian/Ubuntu)"
#: Erlang flags that keep the distribution listener on loopback (node and CLI tools alike)
_LOOPBACK_DIST = "-kernel inet_dist_use_interface {127,0,0,1}"


def rabbitmq_bin_dir() -> Path:
    """Directory of ``rabbitmq-server`` and ``rabbitmqctl``; raise MissingDependency when absent."""
    bin_dir = Path(os.environ.get("BRIDGE_RABBITMQ_BIN") or DEFAULT_BIN)
    if not (bin_dir / "rabbitmq-server").is_file():
        raise MissingDependency(f"rabbitmq-server is not installed (no {bin_dir}/rabbitmq-server)", INSTALL_HINT)
    return bin_dir


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
    Management is off by default: it adds ~5 s to every stop. With ``host_user`` the node is
    secured (module docstring): :attr:`uri` then logs in as that user; without it (test
    fixtures) as ``guest``. What a start changed on the way (users made or removed, modes
    tightened) is listed in :attr:`changes`.
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
        host_user: str | None = None,
    ) -> None:
        self.base = Path(base)
        self.nodename = nodename or default_nodename(self.base)
        self.amqp_port = amqp_port
        self.dist_port = dist_port
        self.extra_conf = list(extra_conf)
        self.management = management
        self.management_port = management_port
        self.host_user = host_user
        self.process: subprocess.Popen | None = None
        self.pgid: int | None = None
        self._users: NodeUsers | None = None
        #: what the last start (or :meth:`secure_running`) changed, one phrase each
        self.changes: list[str] = []

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
    def credentials_file(self) -> Path:
        """The secured node's users and passwords (0600)."""
        return self.base / "credentials.json"

    @property
    def definitions_file(self) -> Path:
        """What the secured node imports at every boot: its users, by password hash only."""
        return self.base / "definitions.json"

    @property
    def users(self) -> NodeUsers | None:
        """The secured node's users (read from :attr:`credentials_file`); None unsecured."""
        if self.host_user is None:
            return None
        if self._users is None:
            self._users = NodeUsers.load(self.credentials_file)
            if self._users is None:
                raise BrokerUnavailable(
                    f"the broker's credentials are missing ({self.credentials_file})",
                    "start it with `bridge broker start`",
                )
        return self._users

    @property
    def uri(self) -> str:
        """The AMQP URI of this host's user (``guest`` on an unsecured node)."""
        if self.amqp_port is None:
            raise BrokerUnavailable("the node has no port yet", "start it first")
        users = self.users
        if users is None:
            return f"amqp://{GUEST}:{GUEST}@127.0.0.1:{self.amqp_port}/"
        return f"amqp://{quote(users.host_user, safe='')}:{users.host_password}@127.0.0.1:{self.amqp_port}/"

    @property
    def admin_uri(self) -> str:
        """The AMQP URI of the node's administrator (``guest`` on an unsecured node)."""
        user, password = self.admin_credentials
        return f"amqp://{quote(user, safe='')}:{password}@127.0.0.1:{self.port}/"

    @property
    def admin_credentials(self) -> tuple[str, str]:
        """(user, password) of the node's administrator, for AMQP and the management API."""
        users = self.users
        return (GUEST, GUEST) if users is None else (users.admin_user, users.admin_password)

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
        # epmd (when this node is the one to start it) and the distribution port listen on
        # loopback only: whoever reaches them and has the cookie controls the node
        env["ERL_EPMD_ADDRESS"] = "127.0.0.1"
        env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] = _LOOPBACK_DIST
        env["RABBITMQ_CTL_ERL_ARGS"] = _LOOPBACK_DIST
        return env

    def _has_database(self) -> bool:
        return (self.base / "mnesia" / self.nodename).is_dir()

    def _prepare_users(self) -> None:
        """Load or make the secured node's users (saved 0600), and its definitions file.

        A node whose database predates the credentials still has ``guest``: it is retired
        once the node runs. A new database holds only the definitions' users.
        """
        if self.host_user is None:
            return
        users = NodeUsers.load(self.credentials_file)
        if users is None:
            users = NodeUsers(new_password(), self.host_user, new_password())
            if self._has_database():
                users.retire.append(GUEST)
            self.changes.append(f"made broker users {users.admin_user} and {users.host_user}")
        elif users.host_user != self.host_user:
            users.retire.append(users.host_user)
            users.host_user, users.host_password = self.host_user, new_password()
            self.changes.append(f"made broker user {users.host_user}")
        if not self._has_database():
            users.retire.clear()
        users.retire = [u for u in dict.fromkeys(users.retire) if u not in (users.admin_user, users.host_user)]
        users.save(self.credentials_file)
        write_private_json(self.definitions_file, users.definitions())
        self._users = users

    def _retire_users(self) -> None:
        """Delete the users :attr:`NodeUsers.retire` lists (the node runs). One that cannot be
        deleted now stays listed, is named in :attr:`changes`, and is retried at the next
        start: the node itself is up and should stay usable."""
        users = self.users
        if users is None or not users.retire:
            return
        left = []
        for user in users.retire:
            result = self.ctl("delete_user", user, check=False)
            output = f"{result.stdout} {result.stderr}"
            if result.returncode == 0 or "does not exist" in output or "no_such_user" in output:
                self.changes.append(f"removed broker user {user}")
            else:
                left.append(user)
                self.changes.append(f"could not remove broker user {user} yet (retried at the next start)")
        users.retire = left
        users.save(self.credentials_file)

    def secure_running(self) -> None:
        """Secure this node while it runs (one started unsecured, by an earlier version):
        import the users' definitions, then delete ``guest``. Needs :attr:`host_user`."""
        if self.host_user is None:
            raise BridgeError("secure_running needs a host_user", None)
        self.changes = []
        self._prepare_users()
        self.ctl("import_definitions", str(self.definitions_file))
        self._retire_users()

    def _write_files(self) -> None:
        for sub in (self.base, self.home, self.base / "mnesia", self.log_dir):
            paths.ensure_private_dir(sub)
        tightened = paths.tighten_tree(self.base)
        if tightened and self.host_user is not None:
            self.changes.append(f"made {tightened} broker files private")
        (self.base / "env.conf").write_text("")  # shadows /etc/rabbitmq/rabbitmq-env.conf
        lines = [f"listeners.tcp.default = 127.0.0.1:{self.amqp_port}"]
        self._prepare_users()
        if self.host_user is not None:
            # no guest is seeded on a new database, and our users are (re)set at every boot
            lines.append(f"load_definitions = {self.definitions_file}")
        plugins = "[]."
        if self.management:
            lines.append(f"management.tcp.port = {self.management_port}")
            lines.append("management.tcp.ip = 127.0.0.1")
            plugins = "[rabbitmq_management]."
        lines.extend(self.extra_conf)
        conf = self.base / "rabbitmq.conf"
        conf.write_text("\n".join(lines) + "\n")
        (self.base / "enabled_plugins").write_text(plugins + "\n")
        for written in (conf, self.base / "enabled_plugins", self.base / "env.conf"):
            written.chmod(0o600)

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
        self.changes = []
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
                self._retire_users()
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
        with paths.open_private_append(self.stdout_file) as out:
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
                umask=0o077,  # the node's logs, database and message store: the owner's only
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
        self,
        *args: str,
        check: bool = True,
        timeout: float = 60.0,
        tool: str = "rabbitmqctl",
        umask: int = -1,
    ) -> subprocess.CompletedProcess:
        """Run ``rabbitmqctl -n NODE ARGS`` (or another CLI ``tool``) with this node's cookie.

        Each call costs ~0.5 s (an Elixir escript start). ``check`` raises BridgeError with
        the tool's stderr on a non-zero exit; a tool still running after ``timeout`` raises
        Timeout. ``umask`` (when not -1) is the tool's, for files it writes as the node would.
        """
        cmd = [str(rabbitmq_bin_dir() / tool), "-n", self.nodename, *args]
        try:
            result = subprocess.run(
                cmd,
                env=self.env(),
                cwd=self.base,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                umask=umask,
            )
        except subprocess.TimeoutExpired:
            raise Timeout(
                f"{tool} {args[0] if args else ''} on {self.nodename} did not finish within {timeout:g}s",
                f"is the machine overloaded? see {self.log_file}",
            ) from None
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


def default_nodename(base: Path) -> str:
    """``bridge-<hash>@localhost``: unique per data dir, so two users or two XDG-isolated
    "hosts" on one machine never collide in epmd."""
    digest = hashlib.sha256(str(Path(base).resolve()).encode()).hexdigest()[:10]
    return f"bridge-{digest}@localhost"
