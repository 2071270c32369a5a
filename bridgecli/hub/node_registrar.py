"""Where a registrar runs and as whom: the hub machine, or a cluster hub's node machine.

On the hub machine the registrar reads the hub's settings and the node's admin credential.
A node machine has neither: ``bridge join --node`` saves what its registrar needs from the
enrolment answer (the cluster's admin credential, the hub's id and host) in
``registrar.json`` under the node's private directory, next to its own copy of the records.
``bridge join --node`` and ``bridge broker start`` start that registrar, ``bridge broker
stop`` stops it; it never writes the hub machine's files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bridgecli import localbroker, paths
from bridgecli.errors import BrokerUnavailable, Timeout
from bridgecli.hub import cluster, layout
from bridgecli.nodeprocess import pid_alive


@dataclass(frozen=True)
class Role:
    """What one registrar process serves: the hub's id and host, its records' file, the
    management API and AMQP URI of its machine's node with the admin credential, and
    whether this is the hub machine (which alone runs the roster relay and metrics)."""

    hub_id: str
    hub_host: str
    cluster: bool
    db_path: Path
    management_port: int
    admin_user: str
    admin_password: str
    amqp_port: int
    on_hub: bool

    @property
    def amqp_uri(self) -> str:
        return f"amqp://{quote(self.admin_user, safe='')}:{self.admin_password}@127.0.0.1:{self.amqp_port}/"

    @property
    def connection_name(self) -> str:
        return "bridge-hub-registrar" if self.on_hub else "bridge-node-registrar"


def _config_file() -> Path:
    return cluster.node_dir() / "registrar.json"


def _pid_file() -> Path:
    return cluster.node_dir() / "registrar.pid"


def log_file() -> Path:
    """A node machine's registrar log."""
    return cluster.node_dir() / "registrar.log"


def save(answer: dict[str, Any]) -> None:
    """Keep a node enrolment answer's registrar part (0600), for :func:`role`."""
    part = answer["registrar"]
    record = {"hub": answer["hub"], "hubHost": part["hubHost"], "user": part["user"], "password": part["password"]}
    cluster.write_private(_config_file(), json.dumps(record).encode())


def answer_part(hub_host: str) -> dict[str, str]:
    """The registrar part of a node enrolment answer, on the hub machine: the node's admin
    credential (the cookie it also receives controls the node anyway) and the hub's host."""
    user, password = localbroker.admin_credentials()
    return {"hubHost": hub_host, "user": user, "password": password}


def role() -> Role | None:
    """This machine's registrar role; None when it is neither a hub nor a node with a saved
    registrar, or its node does not run."""
    info = localbroker.read_state()
    settings = layout.load()
    if info is None:
        return None
    if settings is not None:
        user, password = localbroker.admin_credentials()
        return Role(
            settings.hub_id,
            settings.host_id,
            settings.cluster,
            layout.db_path(),
            settings.management_port,
            user,
            password,
            info.amqp_port,
            on_hub=True,
        )
    try:
        saved = json.loads(_config_file().read_text())
    except (OSError, ValueError):
        return None
    user, password = str(saved["user"]), str(saved["password"])
    return Role(
        str(saved["hub"]),
        str(saved["hubHost"]),
        True,
        cluster.node_dir() / "hub.db",
        info.management_port,
        user,
        password,
        info.amqp_port,
        on_hub=False,
    )


def _pid() -> int:
    try:
        return int(_pid_file().read_text().strip())
    except (OSError, ValueError):
        return 0


def launch(log: Path) -> tuple[subprocess.Popen, int]:
    """Start a registrar process (of the hub machine or a node's) appending to ``log``:
    (the process, the log's size before it), for :func:`read_from`."""
    offset = log.stat().st_size if log.exists() else 0
    with paths.open_private_append(log) as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "bridgecli.hub.registrar"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ),
            umask=0o077,
        )
    return process, offset


def read_from(path: Path, offset: int) -> str:
    """What ``path`` holds past ``offset`` ("" when it cannot be read)."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def start(timeout: float = 60.0) -> int | None:
    """Start this node machine's registrar unless it runs; its pid (None: no node here)."""
    if not _config_file().exists():
        return None
    if pid_alive(_pid()):
        return _pid()
    log = log_file()
    process, offset = launch(log)
    cluster.write_private(_pid_file(), str(process.pid).encode())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = read_from(log, offset)
        if "registrar serving" in text:
            return process.pid
        if process.poll() is not None:
            raise BrokerUnavailable(f"this node's registrar exited at start: {text.strip()[-300:]}", f"see {log}")
        time.sleep(0.1)
    raise Timeout(f"this node's registrar did not start within {timeout:g}s", f"see {log}")


def stop(timeout: float = 30.0) -> bool:
    """Stop this node machine's registrar; False when none ran."""
    pid = _pid()
    if not pid_alive(pid):
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    _pid_file().unlink(missing_ok=True)
    return True
