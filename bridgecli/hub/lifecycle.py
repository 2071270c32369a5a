"""``bridge hub start|stop|status``: the embedded node made reachable over TLS, plus the registrar.

The hub is the embedded node of ``bridge broker`` with an amqps listener (certificate from
the hub's own CA), the management plugin on loopback and the registrar process. ``hub start``
also declares the shared objects as the node's admin and turns the sender check on. Settings,
CA, users and grants are kept, so a plain restart reproduces all; a hub made by an earlier
version is secured on the way, and the start says what changed.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridgecli import localbroker, paths
from bridgecli.errors import BridgeError, BrokerUnavailable, ConfigError, ExitCode, MetricsAddressError, Timeout
from bridgecli.hub import cluster as hub_cluster
from bridgecli.hub import convert, layout, node_registrar
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.layout import DEFAULT_AMQPS_PORT, HubSettings
from bridgecli.hub.pki import HubPki
from bridgecli.metrics_http import ADDRESS_FIX, parse_address
from bridgecli.node_dist import node_name
from bridgecli.nodeprocess import free_port, pid_alive, port_is_free


def parse_listen(text: str) -> tuple[str, int | None]:
    """``ADDR`` or ``ADDR:PORT`` (``[v6]:PORT`` for IPv6) → (address, port or None)."""
    host, port = text, None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
    elif text.count(":") == 1:
        host, port = text.split(":")
    try:
        ipaddress.ip_address(host)
        number = int(port) if port is not None else None
        if number is not None and not 0 < number < 65536:
            raise ValueError
    except ValueError:
        raise ConfigError(
            f"bad --listen {text!r}", "give an IP address of this machine, optionally with :PORT (e.g. 192.0.2.10:5671)"
        ) from None
    return host, number


def _choose_ports(wanted: list[tuple[str, int | None]], before: HubSettings | None) -> list[tuple[str, int]]:
    """A port for each listener: the one asked for, else the one it had, else 5671 when
    free, else a free one (a port of our own running listener counts as free)."""
    kept = dict(before.listen) if before else {}
    chosen = []
    for addr, port in wanted:
        if port is None:
            port = kept.get(addr) or (DEFAULT_AMQPS_PORT if port_is_free(DEFAULT_AMQPS_PORT, addr) else free_port())
        chosen.append((addr, port))
    return chosen


def tls_listener_conf(listen: list[tuple[str, int]], cafile: Path, certfile: Path, keyfile: Path) -> list[str]:
    """``rabbitmq.conf`` lines of the AMQPS listeners on ``listen``: every hub node's, so that
    hosts see the same TLS wherever they connect (no client certificates: users log in)."""
    lines = [f"listeners.ssl.{i} = {f'[{a}]' if ':' in a else a}:{p}" for i, (a, p) in enumerate(listen, 1)]
    return lines + [
        f"ssl_options.cacertfile = {cafile}",
        f"ssl_options.certfile = {certfile}",
        f"ssl_options.keyfile = {keyfile}",
        "ssl_options.verify = verify_none",
        "ssl_options.fail_if_no_peer_cert = false",
    ]


def _tls_conf(pki: HubPki, listen: list[tuple[str, int]]) -> list[str]:
    return tls_listener_conf(listen, pki.ca_cert, pki.server_cert, pki.server_key)


@dataclass
class HubStart:
    settings: HubSettings
    already_running: bool
    restarted_plain_broker: bool
    ca_fingerprint: str
    seconds: float
    #: what this start changed to secure the hub (users, file modes, sender check)
    changes: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """The changes as one line for the operator ("" when there were none)."""
        return f"secured this hub: {'; '.join(self.changes)}" if self.changes else ""


def start(config: Any, listen: list[str], names: list[str], timeout: float = 90.0, cluster: bool = False) -> HubStart:
    """Start (or keep) the hub. ``listen``/``names`` replace the saved ones when given;
    ``cluster`` makes the hub's node a cluster node (kept for later starts): a new one, or
    the existing node converted in place with every user, queue and message
    (:mod:`bridgecli.hub.convert`), whose queue type then stays as it was."""
    began = time.monotonic()
    before = layout.load()
    resumed = convert.pending()  # an interrupted conversion: finish it
    old = resumed.old if resumed else convert.old_node(before, cluster)
    host_id = config.host_id
    wanted = [parse_listen(x) for x in listen] or [(a, p) for a, p in (before.listen if before else [])]
    if not wanted:
        raise ConfigError(
            "the hub needs an address to listen on",
            "give the address other hosts reach this machine at: `bridge hub start --listen ADDR`",
        )
    names = list(names) or (before.names if before else [])
    if config.values["hub.metrics"]:  # a malformed address stops the start before the node's
        parse_address(config.values["hub.metrics"])
    settings = HubSettings(
        hub_id=before.hub_id if before else host_id,
        host_id=host_id,
        listen=_choose_ports(wanted, before),
        names=names,
        management_port=before.management_port if before else 0,
        registrar_pid=before.registrar_pid if before else 0,
        cluster=bool(cluster or resumed or (before and before.cluster)),
        converted_from=(before.converted_from if before else "") or (old or ""),
    )
    if settings.cluster:
        settings.node_address = (
            (resumed.address if resumed else "")
            or (before.node_address if before else "")
            or hub_cluster.node_address(settings.listen)
        )
    conversion = resumed or (convert.begin(old, settings.node_address) if old else None)
    changes = _tighten_files()
    # before the node restarts: the running gateway re-reads the check as it reconnects
    changes += _check_senders()
    pki = HubPki(layout.pki_dir())
    pki.ensure_ca(settings.hub_id)
    reissued = pki.ensure_server_cert([a for a, _ in settings.listen if a not in ("0.0.0.0", "::")], names)
    running = localbroker.read_state()
    secured = running is not None and localbroker.uri_user(running.uri) == host_id
    same = (
        before is not None
        and before.active
        and running is not None
        and running.management_port
        and secured
        and before.listen == settings.listen
        and not reissued
        and (not settings.cluster or running.nodename == node_name(settings.node_address))
    )
    restarted_plain = running is not None and not running.management_port
    if conversion is not None:  # the plain hub's registrar would declare its own queue again
        _stop_registrar(settings.registrar_pid, timeout)
    if running is not None and not same:
        localbroker.stop()
        running = None
    if running is None:
        if conversion is not None:
            changes += convert.rename(conversion, timeout)
        mgmt = (
            settings.management_port
            if settings.management_port and port_is_free(settings.management_port)
            else free_port()
        )
        node_options: dict[str, Any] = {}
        if settings.cluster:
            node_options = {"dist": hub_cluster.hub_dist(settings.node_address), "cookie": hub_cluster.cookie()}
        result = localbroker.start(
            timeout,
            host=host_id,
            management=True,
            management_port=mgmt,
            extra_conf=_tls_conf(pki, settings.listen),
            **node_options,
        )
        changes += result.changes
        settings.management_port = result.info.management_port
        running = result.info
    else:
        settings.management_port = running.management_port
    settings.active = True
    layout.save(settings)
    queue_type = config.values["messaging.inbox_queue_type"]
    if settings.cluster:
        hub_cluster.settle_partitions()  # a restarted node has RabbitMQ's default again
        if not settings.converted_from:  # a converted hub's queues stay as they were
            changes += _quorum_inboxes(queue_type)
            queue_type = "quorum"
    _declare_shared(running, queue_type)
    if conversion is not None:
        changes += convert.replicate_registrar_queue(running)
        convert.finish()
    _own_local_entities(settings)
    if not same and pid_alive(settings.registrar_pid):
        _stop_registrar(settings.registrar_pid, timeout)  # it logged in to the node before
    if not pid_alive(settings.registrar_pid):
        settings.registrar_pid = _start_registrar(timeout)
        layout.save(settings)
    return HubStart(
        settings,
        already_running=bool(same),
        restarted_plain_broker=bool(restarted_plain),
        ca_fingerprint=pki.ca_fingerprint(),
        seconds=time.monotonic() - began,
        changes=changes,
    )


def _tighten_files() -> list[str]:
    """This machine's bridge files private: the data and state dirs and everything in them
    (0700 dirs, no group or other bits on files); a hub made by an earlier version had 0644
    files in 0755 dirs. Returns what changed."""
    changed = 0
    for root in (paths.data_dir(), paths.state_dir()):
        if root.exists():
            changed += paths.tighten_tree(root)
    paths.ensure_private_dir(layout.hub_dir())
    return [f"made {changed} files and directories private"] if changed else []


def _declare_shared(info: localbroker.NodeInfo, queue_type: str) -> None:
    """Declare the shared exchanges and queues as the node's admin, so that they exist
    before any joined host (which may only check them) connects."""
    import pika
    import pika.exceptions

    from bridgecli.amqp import topology
    from bridgecli.amqp.connection import open_blocking

    params = pika.URLParameters(localbroker.admin_uri(info))
    params.client_properties = {"connection_name": "bridge-hub-start", "product": "bridgecli"}
    try:
        connection = open_blocking(params)
    except (pika.exceptions.AMQPError, OSError) as exc:
        raise BrokerUnavailable(
            f"cannot log in to the hub's node as its admin ({type(exc).__name__})",
            f"see {localbroker.log_path()}",
        ) from None
    try:
        channel = connection.channel()
        topology.declare_shared(channel, queue_type)
        # the direct control exchange of older versions: any host that could bind it could
        # bind another host's key; nothing uses it now (deleting a missing one is no error)
        channel.exchange_delete(topology.LEGACY_CONTROL)
    finally:
        if connection.is_open:
            connection.close()


def _check_senders() -> list[str]:
    """``security.sender_check = "host"`` in this machine's bridge.toml, so that the hub's
    own gateway refuses messages whose claimed host is not the user that published them."""
    from bridgecli.config import read_file
    from bridgecli.config_edit import set_values

    try:
        current = (read_file(paths.config_file()).get("security") or {}).get("sender_check")
    except BridgeError:
        current = None  # set_values names what is wrong with the file
    if current == "host":
        return []
    set_values({"security.sender_check": "host"})
    return ["set security.sender_check = host"]


def _quorum_inboxes(current: str) -> list[str]:
    """``messaging.inbox_queue_type = "quorum"`` on a cluster hub's machine, so that its own
    gateway's inboxes are replicated like every joined host's."""
    from bridgecli.config_edit import set_values

    if current == "quorum":
        return []
    set_values({"messaging.inbox_queue_type": "quorum"})
    return ["set messaging.inbox_queue_type = quorum"]


def _own_local_entities(settings: HubSettings) -> None:
    """The hub machine's entities registered before it became a hub are its own from now on,
    so that no joining host can claim their gids."""
    from bridgecli.hoststate.entities import open_registry

    paths.ensure_private_file(layout.db_path())  # SQLite gives -wal and -shm its mode
    store = HubStore(layout.db_path())
    try:
        store.claim(settings.host_id, [(e.gid, e.label) for e in open_registry().all()])
        if settings.cluster and not store.nodes():  # the first node: the hub's own
            port = settings.listen[0][1]
            store.add_node(settings.host_id, f"{settings.node_address}:{port}", node_name(settings.node_address))
    finally:
        store.close()


def _start_registrar(timeout: float) -> int:
    """Launch the registrar process and wait until it consumes its queue."""
    log = layout.registrar_log()
    process, offset = node_registrar.launch(log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = node_registrar.read_from(log, offset)
        if "registrar serving" in text:
            return process.pid
        if process.poll() is not None:
            if process.returncode == ExitCode.METRICS_ADDRESS:  # hub.metrics: taken or unknown host
                said = (text.strip().splitlines() or ["its address cannot be served"])[-1]
                said = said.partition(" ERROR ")[2] or said
                raise MetricsAddressError(f"the hub's registrar: {said} (hub.metrics)", ADDRESS_FIX)
            raise BrokerUnavailable(f"the hub's registrar exited at start: {text.strip()[-300:]}", f"see {log}")
        time.sleep(0.1)
    raise Timeout(f"the hub's registrar did not start within {timeout:g}s", f"see {log}")


def stop(timeout: float = 30.0) -> bool:
    """Stop the registrar and the node; False when no hub was running."""
    settings = layout.load()
    if settings is None or not settings.active:
        return False
    _stop_registrar(settings.registrar_pid, timeout)
    localbroker.stop(timeout)
    settings.active, settings.registrar_pid = False, 0
    layout.save(settings)
    return True


def _stop_registrar(pid: int, timeout: float) -> None:
    """SIGTERM the registrar's process group and wait up to ``timeout`` for it to go."""
    if not pid_alive(pid):
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def status() -> dict[str, Any]:
    """The hub's state for ``bridge hub status``."""
    settings = layout.load()
    node = localbroker.read_state()
    if settings is None:
        return {"running": False, "configured": False, "dir": str(layout.hub_dir())}
    pki = HubPki(layout.pki_dir())
    store = HubStore(layout.db_path())
    try:
        now = time.time()
        hosts = [h for h in store.hosts() if h.revoked is None]
        invites = [i for i in store.invites() if i.state(now) == "open"]
    finally:
        store.close()
    return {
        "running": bool(settings.active and node is not None),
        "configured": True,
        "hub": settings.hub_id,
        "host": settings.host_id,
        "addresses": settings.addresses,
        "ca_fingerprint": pki.ca_fingerprint() if pki.ca_cert.exists() else None,
        "registrar": {"pid": settings.registrar_pid or None, "alive": pid_alive(settings.registrar_pid)},
        "broker": {
            "pid": node.pid if node else None,
            "amqp_port": node.amqp_port if node else None,
            "management_port": settings.management_port,
        },
        "cluster": settings.cluster,
        "hosts": len(hosts),
        "open_invites": len(invites),
        "dir": str(layout.hub_dir()),
    }
