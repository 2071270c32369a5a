"""The embedded default broker: one private RabbitMQ node per user (per data dir).

On a single machine with no ``broker.uri`` configured, ``bridge broker start`` runs Debian's
``rabbitmq-server`` as an ordinary process (no systemd, no root-owned state) with all of its
files under ``paths.data_dir()/broker/`` and records its URI and pid in ``state.json``;
:func:`recorded_uri` is how every other command finds it. The node itself is a
:class:`bridgecli.rabbitnode.LocalNode` (re-exported here with its helpers).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bridgecli import paths
from bridgecli.errors import BridgeError
from bridgecli.rabbitnode import (  # noqa: F401  (re-exported for callers and tests)
    DEFAULT_AMQP_PORT,
    DEFAULT_DIST_PORT,
    LocalNode,
    NodeInfo,
    amqp_ready,
    default_nodename,
    epmd_names,
    free_port,
    group_alive,
    pid_alive,
    port_is_free,
    rabbitmq_bin_dir,
    stop_epmd_if_idle,
    stop_processes,
)


def broker_dir() -> Path:
    """``paths.data_dir()/broker``: the embedded node's files and ``state.json``."""
    return paths.data_dir() / "broker"


def _state_file() -> Path:
    return broker_dir() / "state.json"


def _ports_file() -> Path:
    return broker_dir() / "ports.json"


def read_state() -> NodeInfo | None:
    """The recorded node, or None when none is recorded or its VM has gone."""
    try:
        raw = json.loads(_state_file().read_text())
        info = NodeInfo(**raw)
    except (OSError, ValueError, TypeError):
        return None
    return info if pid_alive(info.pid) else None


def recorded_uri() -> str | None:
    """URI of the running embedded broker, or None when it is not running."""
    info = read_state()
    return info.uri if info else None


def embedded_node(**options: Any) -> LocalNode:
    """The embedded node object, on the ports it used last (else 5672/25672 when free);
    ``options`` go to :class:`LocalNode` (the hub adds its TLS listener and management)."""
    base = broker_dir()
    amqp_port, dist_port = DEFAULT_AMQP_PORT, DEFAULT_DIST_PORT
    try:
        ports = json.loads(_ports_file().read_text())
        amqp_port, dist_port = int(ports["amqp_port"]), int(ports["dist_port"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return LocalNode(base, amqp_port=amqp_port, dist_port=dist_port, **options)


@dataclass
class StartResult:
    info: NodeInfo
    already_running: bool
    seconds: float


def start(timeout: float = 90.0, **options: Any) -> StartResult:
    """Start the embedded node unless it already runs; record its URI and pid.

    Serialised by a lock file, so two concurrent ``bridge broker start`` (e.g. two panes
    running ``./dev run``) start one node and the second reports it as already running.
    """
    with _locked():
        current = read_state()
        if current is not None:
            return StartResult(current, already_running=True, seconds=0.0)
        node = embedded_node(**options)
        began = time.monotonic()
        node.start(timeout)
        info = node.info()
        _write_json(_ports_file(), {"amqp_port": info.amqp_port, "dist_port": info.dist_port})
        _write_json(_state_file(), asdict(info))
        return StartResult(info, already_running=False, seconds=time.monotonic() - began)


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Hold an exclusive lock on ``broker/lock`` (released when the process dies)."""
    paths.ensure_private_dir(broker_dir())
    with open(broker_dir() / "lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def stop(timeout: float = 30.0) -> NodeInfo | None:
    """Stop the embedded node; returns what was stopped (None: it was not running).

    Also stops epmd when this was the last Erlang node registered with it.
    """
    with _locked():
        info = read_state()
        _state_file().unlink(missing_ok=True)
        if info is None:
            return None
        stop_processes(info.pid, info.pgid, timeout)
    if pid_alive(info.pid):
        raise BridgeError(
            f"RabbitMQ node {info.nodename} (pid {info.pid}) did not stop", f"kill it with `kill -9 {info.pid}`"
        )
    stop_epmd_if_idle()
    return info


def status() -> dict[str, object]:
    """A status dict for ``bridge broker status``: running, uri, pid, node, accepting."""
    info = read_state()
    if info is None:
        return {"running": False, "uri": None, "dir": str(broker_dir())}
    return {
        "running": True,
        "uri": info.uri,
        "pid": info.pid,
        "node": info.nodename,
        "amqp_port": info.amqp_port,
        "dist_port": info.dist_port,
        "accepting": amqp_ready("127.0.0.1", info.amqp_port, expect=(info.nodename.split("@", 1)[0] + "@").encode()),
        "dir": info.base,
        "since": info.started,
    }


def log_path() -> Path:
    """The embedded node's log file."""
    info = read_state()
    node = LocalNode(broker_dir(), nodename=info.nodename if info else None)
    return node.log_file


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)
