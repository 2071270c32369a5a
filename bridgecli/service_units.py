"""systemd units for bridge's daemons (``bridge service``): the gateway, the hub, the broker.

:func:`render` writes a unit with absolute paths, ``Restart=on-failure`` and the environment the
daemon needs (``PATH``, the XDG directories and the non-secret ``BRIDGE_*`` variables of the
installing shell, so the service reads the same files as the user's commands). A user unit
lives in ``~/.config/systemd/user``, a system unit in ``/etc/systemd/system`` (run as the
installing user). :func:`systemd_running` says whether ``systemctl`` can act here.
"""

from __future__ import annotations

import getpass
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bridgecli.errors import NoSystemd

#: what each daemon is, how it runs, and how it stops
DAEMONS: dict[str, tuple[str, str, list[str], list[str]]] = {
    # name: (Description, Type, ExecStart arguments, ExecStop arguments)
    "gateway": ("bridge gateway: this host's messaging daemon", "simple", ["gateway"], []),
    "hub": ("bridge hub: the embedded broker with TLS and the registrar", "forking", ["hub", "start"], ["hub", "stop"]),
    "broker": ("bridge broker: the embedded RabbitMQ node", "forking", ["broker", "start"], ["broker", "stop"]),
}
#: variables of the installing shell a daemon needs to find its programs and files
CARRIED = (
    "PATH",
    "LANG",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "TMUX_TMPDIR",
)
SYSTEM_DIR = Path("/etc/systemd/system")
SYSTEMD_FIX = "run it on a host booted with systemd, or print the unit with --dry-run and install it yourself"


@dataclass(frozen=True)
class Unit:
    """One generated unit: its name, where it goes, and its text."""

    daemon: str
    scope: str  # user | system
    path: Path
    text: str

    @property
    def name(self) -> str:
        return self.path.name


def unit_name(daemon: str) -> str:
    return f"bridge-{daemon}.service"


def unit_dir(scope: str, env: Mapping[str, str] | None = None) -> Path:
    """Where a ``scope`` unit is installed."""
    if scope == "system":
        return SYSTEM_DIR
    env = os.environ if env is None else env
    config = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(config) / "systemd" / "user"


def bridge_executable() -> str:
    """The absolute path of this ``bridge`` (next to the running interpreter, else on PATH)."""
    beside = Path(sys.executable).parent / "bridge"
    if beside.is_file():
        return str(beside.absolute())
    found = shutil.which("bridge")
    return str(Path(found).absolute()) if found else str(beside.absolute())


def daemon_environment(env: Mapping[str, str], scope: str) -> dict[str, str]:
    """The variables a daemon gets: :data:`CARRIED`, ``HOME`` and ``XDG_RUNTIME_DIR`` for a
    system unit (a user manager sets them), and each ``BRIDGE_*`` setting that is not a
    secret (secrets belong in the private config file, not in a unit anyone may read)."""
    from bridgecli.config import SETTINGS

    secret = {s.env for s in SETTINGS.values() if s.secret} | {"BRIDGE_BROKER_URI"}
    keys = [*CARRIED, *(("HOME", "XDG_RUNTIME_DIR") if scope == "system" else ())]
    chosen = {key: env[key] for key in keys if env.get(key)}
    chosen.update({k: v for k, v in sorted(env.items()) if k.startswith("BRIDGE_") and k not in secret})
    uri = env.get("BRIDGE_BROKER_URI", "")
    if uri and "@" not in uri:  # no credentials in it: safe to write down
        chosen["BRIDGE_BROKER_URI"] = uri
    chosen["PYTHONUNBUFFERED"] = "1"  # log lines reach the journal as they are written
    return chosen


def render(daemon: str, scope: str, env: Mapping[str, str] | None = None, executable: str | None = None) -> Unit:
    """The unit of ``daemon`` for ``scope`` (``user`` or ``system``)."""
    env = os.environ if env is None else env
    description, kind, start, stop = DAEMONS[daemon]
    exe = executable or bridge_executable()
    lines = [
        "# written by `bridge service install`; `bridge service uninstall` removes it",
        "[Unit]",
        f"Description={description}",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        f"Type={kind}",
        f"ExecStart={shlex.join([exe, *start])}",
    ]
    if stop:
        lines.append(f"ExecStop={shlex.join([exe, *stop])}")
    if kind == "forking":
        from bridgecli import localbroker

        lines.append(f"PIDFile={localbroker.broker_dir() / 'rabbitmq.pid'}")
        lines.append("TimeoutStartSec=120")
    lines += ["Restart=on-failure", "RestartSec=5"]
    if scope == "system":
        lines.append(f"User={getpass.getuser()}")
        lines.append(f"WorkingDirectory={env.get('HOME') or Path.home()}")
    for key, value in daemon_environment(env, scope).items():
        lines.append(f"Environment={_quoted(f'{key}={value}')}")
    lines += ["", "[Install]", f"WantedBy={'default.target' if scope == 'user' else 'multi-user.target'}", ""]
    return Unit(daemon, scope, unit_dir(scope, env) / unit_name(daemon), "\n".join(lines))


def _quoted(assignment: str) -> str:
    """An ``Environment=`` value: double-quoted, with systemd's escapes for ``"``, ``\\`` and ``%``."""
    escaped = assignment.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{escaped}"'


def systemd_running() -> bool:
    """Whether this machine was booted with systemd (``sd_booted()``: ``/run/systemd/system``)."""
    return Path("/run/systemd/system").is_dir() and shutil.which("systemctl") is not None


def require_systemd(action: str) -> None:
    """Raise :class:`NoSystemd` unless systemd runs here."""
    if not systemd_running():
        raise NoSystemd(f"cannot {action}: systemd is not running on this machine (a container?)", SYSTEMD_FIX)


def systemctl(scope: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``systemctl [--user] ARGS``, its output captured."""
    command = ["systemctl", *(["--user"] if scope == "user" else []), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def linger_hint(scope: str) -> str | None:
    """How to keep a user unit running after logout (None for a system unit)."""
    if scope != "user":
        return None
    return f"to keep it running after you log out: loginctl enable-linger {getpass.getuser()}"
