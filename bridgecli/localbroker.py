"""The embedded default broker: one private RabbitMQ node per user (per data dir).

With no ``broker.uri`` configured, ``bridge broker start`` runs Debian's ``rabbitmq-server``
as an ordinary process with its files under ``paths.data_dir()/broker/`` and records its URI
and pid in ``state.json`` (0600); :func:`recorded_uri` is how every other command finds it.
The node (:class:`bridgecli.rabbitnode.LocalNode`) is always secured: no ``guest``, and its
URI logs in as this host's own user, so that other hosts' sender check accepts what it
publishes and no other local user can take the broker over.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from bridgecli import paths
from bridgecli.errors import BridgeError, BrokerUnavailable, Conflict
from bridgecli.node_dist import ClusterNode, DistTls
from bridgecli.nodeprocess import (  # noqa: F401  (re-exported for callers and tests)
    amqp_ready,
    epmd_names,
    free_port,
    group_alive,
    pid_alive,
    port_is_free,
    stop_epmd_if_idle,
    stop_processes,
)
from bridgecli.nodeusers import ADMIN_USER, GUEST, NodeUsers, write_private_json  # noqa: F401  (re-exported)
from bridgecli.rabbitnode import (  # noqa: F401  (re-exported for callers and tests)
    DEFAULT_AMQP_PORT,
    DEFAULT_DIST_PORT,
    LocalNode,
    NodeInfo,
    default_nodename,
    rabbitmq_bin_dir,
)


def broker_dir() -> Path:
    """``paths.data_dir()/broker``: the embedded node's files and ``state.json``."""
    return paths.data_dir() / "broker"


def _state_file() -> Path:
    return broker_dir() / "state.json"


def _ports_file() -> Path:
    return broker_dir() / "ports.json"


def conversion_file() -> Path:
    """Present while ``bridge hub start --cluster`` converts this node into a cluster node
    (:mod:`bridgecli.hub.convert`): the node must not start under its old name meanwhile."""
    return broker_dir() / "converting.json"


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


def host_user() -> str:
    """The broker user of this host's gateway and CLI: the configured host id (the
    hostname-derived default when the configuration cannot be read)."""
    from bridgecli import config

    try:
        return config.load(allow_unknown=True).host_id
    except BridgeError:  # a broken file: `bridge config` says what is wrong with it
        return config.default_host_id()


def credentials() -> NodeUsers | None:
    """The embedded node's users and passwords (None before its first secured start)."""
    return NodeUsers.load(broker_dir() / "credentials.json")


def admin_credentials() -> tuple[str, str]:
    """(user, password) of the embedded node's administrator; BrokerUnavailable before the
    node was ever started by this version."""
    users = credentials()
    if users is None:
        raise BrokerUnavailable(
            f"the embedded broker has no admin credential yet ({broker_dir() / 'credentials.json'})",
            "start it with `bridge broker start` (or `bridge hub start`)",
        )
    return users.admin_user, users.admin_password


def admin_uri(info: NodeInfo) -> str:
    """The AMQP URI of the running embedded node's administrator."""
    user, password = admin_credentials()
    return f"amqp://{quote(user, safe='')}:{password}@127.0.0.1:{info.amqp_port}/"


def uri_user(uri: str) -> str:
    """The user an AMQP URI logs in as (``guest`` when it names none, as pika does)."""
    return unquote(urlsplit(uri).username or GUEST)


def embedded_node(host: str | None = None, dist: DistTls | None = None, **options: Any) -> LocalNode:
    """The embedded node object, on the ports it used last (else 5672/25672 when free), its
    host user ``host`` (default: :func:`host_user`); ``options`` go to :class:`LocalNode`
    (the hub adds its TLS listener and management). With ``dist`` it is a :class:`ClusterNode`
    (``options`` may then hold its ``cookie``): a cluster hub's first node."""
    base = broker_dir()
    amqp_port, dist_port = DEFAULT_AMQP_PORT, DEFAULT_DIST_PORT
    try:
        ports = json.loads(_ports_file().read_text())
        amqp_port, dist_port = int(ports["amqp_port"]), int(ports["dist_port"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if dist is not None:
        return ClusterNode(base, dist, amqp_port=amqp_port, host_user=host or host_user(), **options)
    return LocalNode(base, amqp_port=amqp_port, dist_port=dist_port, host_user=host or host_user(), **options)


@dataclass
class StartResult:
    info: NodeInfo
    already_running: bool
    seconds: float
    #: what this start changed to secure the node, one phrase each (empty: nothing)
    changes: list[str] = field(default_factory=list)


def start(timeout: float = 90.0, host: str | None = None, **options: Any) -> StartResult:
    """Start the embedded node unless it already runs; record its URI and pid (0600).

    The node logs in ``host``'s user (default: :func:`host_user`). A running node that an
    earlier version started (its recorded URI is ``guest``'s) or that has another host user
    is secured in place, without a restart. The data dir and the node's files are made
    private (0700/0600) on the way. Serialised by a lock file, so two concurrent ``bridge
    broker start`` (e.g. two panes running ``./dev run``) start one node and the second
    reports it as already running.
    """
    host = host or host_user()
    with _locked():
        if options.get("dist") is None and conversion_file().exists():
            raise Conflict(
                "this node's conversion into a cluster node is unfinished: it cannot start under its old name",
                "finish it with `bridge hub start --cluster`",
            )
        changes = _tighten_data_dir()
        current = read_state()
        if current is not None:
            if uri_user(current.uri) != host:
                node = LocalNode(
                    Path(current.base), nodename=current.nodename, amqp_port=current.amqp_port, host_user=host
                )
                node.secure_running()
                current.uri = node.uri
                write_private_json(_state_file(), asdict(current))
                changes += node.changes
            return StartResult(current, already_running=True, seconds=0.0, changes=changes)
        node = embedded_node(host, **options)
        began = time.monotonic()
        node.start(timeout)
        info = record(node)
        return StartResult(
            info, already_running=False, seconds=time.monotonic() - began, changes=changes + node.changes
        )


def start_node(node: LocalNode, timeout: float = 90.0) -> StartResult:
    """Start ``node`` (a joined cluster node, built from its saved settings) as this
    machine's embedded node unless one already runs, and record it; under the same lock
    as :func:`start`, so that two concurrent starts start one node."""
    with _locked():
        changes = _tighten_data_dir()
        current = read_state()
        if current is not None:
            return StartResult(current, already_running=True, seconds=0.0, changes=changes)
        began = time.monotonic()
        node.start(timeout)
        return StartResult(record(node), already_running=False, seconds=time.monotonic() - began, changes=changes)


def record(node: LocalNode) -> NodeInfo:
    """Record the running ``node`` as this machine's embedded node (``state.json`` and its
    ports, 0600): every command that looks for the embedded node then finds it."""
    info = node.info()
    write_private_json(_ports_file(), {"amqp_port": info.amqp_port, "dist_port": info.dist_port})
    write_private_json(_state_file(), asdict(info))
    return info


def _tighten_data_dir() -> list[str]:
    """The data dir private (0700) and, within it, the broker's files; what changed."""
    data = paths.data_dir()
    changed = int(paths.tighten(data))
    paths.ensure_private_dir(data)
    changed += paths.tighten_tree(broker_dir())
    return [f"made {changed} files and directories private"] if changed else []


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
