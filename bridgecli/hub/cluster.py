"""A cluster hub: its first node's files, node invites, the node list, removing a node.

``bridge hub start --cluster`` runs the hub's node as a :class:`ClusterNode` named after its
address (converting the node of a hub made without it: :mod:`bridgecli.hub.convert`); other
machines join it with a node invite (:mod:`bridgecli.hub.node_join`), so that hosts can fail
over to them. The Erlang cookie and the node's certificate live in the
hub's private directory; a joined node keeps its own under its state directory. Exit codes:
``NOT_A_CLUSTER`` for a cluster operation elsewhere, ``CONFLICT`` for each refused removal.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import secrets
import string
from pathlib import Path
from typing import Any

from bridgecli import localbroker, paths
from bridgecli.config import HOST_ID_RE
from bridgecli.errors import BridgeError, CannotWrite, ConfigError, Conflict, NotACluster, NotFound
from bridgecli.hub import invite as invite_mod
from bridgecli.hub import layout
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.layout import HubSettings
from bridgecli.hub.pki import HubPki
from bridgecli.node_dist import ClusterNode, DistTls, node_name

logger = logging.getLogger("bridgecli.hub")
#: how to make a hub made without --cluster a cluster hub (its node is converted in place)
FRESH_HINT = "convert it, keeping every user, queue and message: `bridge hub start --cluster` on the hub machine"


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, mode 0600 from the start."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.unlink(missing_ok=True)
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
            handle.write(data)
        tmp.replace(path)
    except OSError as exc:
        raise CannotWrite(f"cannot write {path}: {exc.strerror}", "check the data directory") from None


def node_address(listen: list[tuple[str, int]]) -> str:
    """The first concrete IPv4 listen address: the cluster node is named after it."""
    for address, _ in listen:
        if address not in ("0.0.0.0", "::") and ipaddress.ip_address(address).version == 4:
            return address
    raise ConfigError(
        "a cluster hub needs a concrete IPv4 --listen address to name its node after",
        "give the address other machines reach this one at: `--listen 192.0.2.10 --cluster`",
    )


def cookie() -> str:
    """The cluster's Erlang cookie (made once, 0600 in the hub's cluster directory)."""
    path = paths.ensure_private_dir(layout.cluster_dir()) / "cookie"
    if path.exists():
        return path.read_text().strip()
    made = "".join(secrets.choice(string.ascii_uppercase) for _ in range(40))
    write_private(path, made.encode())
    return made


def hub_dist(address: str) -> DistTls:
    """The hub node's distribution TLS files; its certificate is issued by the hub CA once
    (its key never leaves the hub's cluster directory)."""
    directory = paths.ensure_private_dir(layout.cluster_dir())
    pki = HubPki(layout.pki_dir())
    cert, key = directory / "node.pem", directory / "node.key"
    if not (cert.exists() and key.exists()):
        key_pem, cert_pem = pki.issue_node_cert(f"node-{address}", [address])
        write_private(key, key_pem)
        write_private(cert, cert_pem)
    return DistTls(address, cert, key, pki.ca_cert)


# --- a node machine's own files --------------------------------------------------------
def node_dir() -> Path:
    """Where a joined node's machine keeps its cluster files (0700)."""
    return paths.state_dir() / "node"


def read_node_record() -> dict[str, Any] | None:
    """What ``bridge join --node`` recorded on this machine (None: it is no joined node)."""
    try:
        return dict(json.loads((node_dir() / "node.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def node_dist(record: dict[str, Any]) -> DistTls:
    directory = node_dir()
    return DistTls(record["address"], directory / "node.pem", directory / "node.key", directory / "ca.pem")


def local_node() -> tuple[ClusterNode, HubSettings | None, dict[str, Any] | None]:
    """This machine's cluster node (to ask, not to start) with the hub's settings (on the
    hub) or the node's record (on a joined node); NotACluster on any other machine."""
    settings = layout.load()
    if settings is not None and settings.cluster:
        return ClusterNode(localbroker.broker_dir(), hub_dist(settings.node_address)), settings, None
    record = read_node_record()
    if record is not None:
        return ClusterNode(localbroker.broker_dir(), node_dist(record)), None, record
    raise NotACluster(
        "this machine is neither a cluster hub nor one of its nodes",
        "start a hub with `bridge hub start --listen ADDR --cluster`, or join one with `bridge join --node INVITE`",
    )


def settle_partitions(node: ClusterNode | None = None) -> str | None:
    """Have ``node`` (this machine's) set the partition handling of every running member for
    the cluster's current size (:meth:`ClusterNode.apply_partition_handling`); returns the
    mode. Run after every start, join and removal, so that no operator step is needed. A
    failure (a busy cluster that does not answer in time) is a warning, not a failed start:
    None, and the next start, join or removal sets it."""
    node = node or local_node()[0]
    try:
        return node.apply_partition_handling()[0]
    except BridgeError as exc:
        logger.warning(
            "bridge: warning: the node runs, but its cluster's partition handling was not set: %s"
            " — run `bridge broker start` (a node) or `bridge hub start` (the hub) again",
            exc.message,
        )
        return None


# --- the operator's commands ------------------------------------------------------------
def _cluster_hub() -> HubSettings:
    settings = layout.load()
    if settings is None or not settings.active:
        raise NotFound("no hub runs on this machine", "start it with `bridge hub start --listen ADDR --cluster`")
    if not settings.cluster:
        raise NotACluster("this hub is not a cluster (it was started without --cluster)", FRESH_HINT)
    return settings


def create_node_invite(name: str, address: str, expires_in: float) -> dict[str, Any]:
    """A one-time invite for a new cluster node ``name`` at IPv4 ``address``."""
    from bridgecli.hub.rabbitadmin import RabbitAdmin

    if not HOST_ID_RE.match(name):
        raise ConfigError(f"bad node name {name!r}", "use 1-63 characters from a-z 0-9 _ -")
    try:
        if ipaddress.ip_address(address).version != 4 or address == "0.0.0.0":
            raise ValueError
    except ValueError:
        raise ConfigError(f"bad --address {address!r}", "give the new node machine's IPv4 address") from None
    if expires_in <= 0:
        raise ConfigError("an invite must expire in the future", "give --expires like 30m or 2h")
    settings = _cluster_hub()
    store = HubStore(layout.db_path())
    try:
        for node in store.nodes():
            if node.name == name or node.nodename == node_name(address):
                raise Conflict(
                    f"node {node.name} ({node.nodename}) is already in this cluster",
                    f"remove it first: `bridge hub remove-node {node.name}`",
                )
        admin = RabbitAdmin(settings.management_port)
        line = invite_mod.issue(settings, store, admin, name, expires_in, kind="node", address=address)
    finally:
        store.close()
    return {"invite": line.encode(), "id": line.invite_id, "node": name, "address": address, "expires": line.expires}


def list_nodes() -> list[dict[str, Any]]:
    """Every node: name, nodename, address, running (from the local node's cluster status;
    names and addresses from the hub's records, or, on a joined node, from its own)."""
    node, settings, record = local_node()
    if settings is not None:
        store = HubStore(layout.db_path())
        try:
            known = [(n.name, n.nodename, n.address) for n in store.nodes()]
        finally:
            store.close()
    else:
        assert record is not None
        own = (record["name"], record["nodename"], f"{record['address']}:{record['amqps_port']}")
        known = [(n["name"], n["nodename"], n["address"]) for n in record["nodes"]] + [own]
    status = node.cluster_status()
    rows = [
        {"name": name, "nodename": nodename, "address": address, "running": nodename in status.running}
        for name, nodename, address in known
    ]
    seen = {r["nodename"] for r in rows}
    rows += [
        {"name": None, "nodename": m, "address": None, "running": m in status.running}
        for m in status.members
        if m not in seen
    ]
    return rows


def remove_node(name: str) -> dict[str, Any]:
    """Forget the stopped node ``name`` (``forget_cluster_node``) and drop its record.
    Conflict for the hub's own node, a running node, or a removal that leaves fewer than a
    majority of the remaining members running."""
    settings = _cluster_hub()
    store = HubStore(layout.db_path())
    try:
        record = next((n for n in store.nodes() if n.name == name), None)
        if record is None:
            raise NotFound(f"no node {name!r} in this cluster", "see `bridge hub nodes`")
        if record.nodename == node_name(settings.node_address):
            raise Conflict(f"{name} is the hub's own node", "the first node runs the registrar and cannot be removed")
        node = ClusterNode(localbroker.broker_dir(), hub_dist(settings.node_address))
        status = node.cluster_status()
        if record.nodename in status.running:
            raise Conflict(
                f"node {name} ({record.nodename}) is running",
                "stop it first (`bridge broker stop` on that machine), then remove it",
            )
        remaining = [m for m in status.members if m != record.nodename]
        alive = [m for m in status.running if m in remaining]
        if len(alive) * 2 <= len(remaining):
            raise Conflict(
                f"only {len(alive)} of the {len(remaining)} remaining nodes run: not a majority",
                "start the stopped nodes first",
            )
        forgotten = record.nodename in status.members
        if forgotten:
            node.forget(record.nodename)
            node.apply_partition_handling()  # two members left: pausing would stop the survivor
        store.drop_node(name)
    finally:
        store.close()
    return {"removed": name, "nodename": record.nodename, "forgotten": forgotten}
