"""A RabbitMQ node that clusters with nodes on other machines, over mutually verified TLS.

Whoever completes an Erlang distribution handshake with a node controls it, and other
machines on the network may be hostile agents' hosts. So cluster nodes speak distribution
only over TLS, both ends verifying the peer against the hub CA (the cookie is a second lock,
not the only one), on one fixed port with no epmd (``-erl_epmd_port``). Names are long,
``bridge@<IP address>``, so no resolver is involved. See docs/decisions/cluster-distribution.md.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bridgecli import paths
from bridgecli.errors import BridgeError, ClusterPeerUnreachable
from bridgecli.nodeprocess import free_port
from bridgecli.rabbitnode import LocalNode

#: The distribution port of every cluster node (one port cluster-wide: no epmd to ask)
CLUSTER_DIST_PORT = 25672
#: The name part of every cluster node: the AMQP readiness check matches ``bridge@``
NODE_NAME = "bridge"
#: seconds a distribution connection may take to set up (Erlang's default is 7)
SETUP_SECONDS = 30
#: pings of a peer before a join gives up on it
PING_ATTEMPTS = 3
#: members from which a partitioned cluster pauses its minority side (fewer: RabbitMQ's ignore)
PAUSE_MINORITY_FROM = 3


def node_name(address: str) -> str:
    """The cluster node name of the machine at ``address``: ``bridge@ADDRESS``."""
    return f"{NODE_NAME}@{address}"


def _erl_string(text: str) -> str:
    """``text`` as an Erlang string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, created 0600 (never briefly readable by others)."""
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        handle.write(text)


@dataclass(frozen=True)
class DistTls:
    """Where and with which files a node speaks TLS distribution: it listens on
    ``address:port`` and presents ``certfile``/``keyfile``, trusting only ``cafile``."""

    address: str
    certfile: Path
    keyfile: Path
    cafile: Path
    port: int = CLUSTER_DIST_PORT

    def optfile_text(self) -> str:
        """The ``-ssl_dist_optfile`` terms: both roles verify the peer against the CA, and
        the server refuses a peer that presents no certificate."""
        common = (
            f"{{certfile,{_erl_string(str(self.certfile))}}},"
            f"{{keyfile,{_erl_string(str(self.keyfile))}}},"
            f"{{cacertfile,{_erl_string(str(self.cafile))}}},"
            "{verify,verify_peer},{secure_renegotiate,true},{versions,['tlsv1.3','tlsv1.2']}"
        )
        return f"[{{server,[{common},{{fail_if_no_peer_cert,true}}]}},\n {{client,[{common}]}}].\n"

    def erl_args(self, optfile: Path, *, listen: bool) -> str:
        """Erlang flags for TLS distribution without epmd; ``listen`` False for CLI tools,
        which only connect out (and so never take the node's port)."""
        a, b, c, d = (int(part) for part in self.address.split("."))
        args = (
            f"-proto_dist inet_tls -ssl_dist_optfile {optfile} "
            f"-start_epmd false -erl_epmd_port {self.port} "
            f"-kernel inet_dist_use_interface {{{a},{b},{c},{d}}} "
            # a TLS handshake between two busy machines can take longer than the default 7 s
            f"-kernel net_setuptime {SETUP_SECONDS}"
        )
        return args if listen else f"{args} -dist_listen false"


@dataclass
class ClusterStatus:
    """The cluster as one member reports it: every member and the running ones."""

    members: list[str]
    running: list[str]


class ClusterNode(LocalNode):
    """A :class:`LocalNode` named ``bridge@ADDRESS`` whose distribution is :class:`DistTls`;
    its CLI tools (:meth:`ctl`) get the same TLS files, so they reach it the same way.
    AMQP stays on loopback (``amqp_port``; a free one at start when None). Nodes of one
    cluster share their Erlang ``cookie`` (written at start when given). CLI commands that
    gather from every node (``list_queues`` without ``--local``) hang: the CLI cannot be
    reached back."""

    def __init__(
        self,
        base: Path,
        dist: DistTls,
        *,
        cookie: str | None = None,
        amqp_port: int | None = None,
        extra_conf: Sequence[str] = (),
        host_user: str | None = None,
        management: bool = False,
        management_port: int | None = None,
    ) -> None:
        super().__init__(
            base,
            nodename=node_name(dist.address),
            amqp_port=amqp_port,
            dist_port=dist.port,
            extra_conf=extra_conf,
            host_user=host_user,
            management=management,
            management_port=management_port,
        )
        self.dist = dist
        self.cookie = cookie

    @property
    def optfile(self) -> Path:
        """The node's ``-ssl_dist_optfile`` (written at every start)."""
        return self.base / "ssl_dist.conf"

    def env(self) -> dict[str, str]:
        """:meth:`LocalNode.env` with long names and TLS distribution for node and tools;
        epmd, if anything starts it, stays on loopback."""
        env = super().env()
        env["RABBITMQ_USE_LONGNAME"] = "true"
        env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] = f"-name {self.nodename} " + self.dist.erl_args(
            self.optfile, listen=True
        )
        env["RABBITMQ_CTL_ERL_ARGS"] = self.dist.erl_args(self.optfile, listen=False)
        return env

    def start(self, timeout: float = 90.0, *, keep_ports: bool = True) -> None:
        """Write the optfile, then :meth:`LocalNode.start` on the fixed distribution port
        (``keep_ports`` is always on: peers know the port without asking anyone)."""
        for directory in (self.base, self.home):
            paths.ensure_private_dir(directory)
        _write_private(self.optfile, self.dist.optfile_text())
        if self.cookie is not None:
            _write_private(self.home / ".erlang.cookie", self.cookie)
        if self.amqp_port is None:
            self.amqp_port = free_port({self.dist.port})
        if self.management and self.management_port is None:
            self.management_port = free_port({self.dist.port, self.amqp_port})
        super().start(timeout, keep_ports=True)

    def join_cluster(self, peer: str, timeout: float = 120.0) -> float:
        """Make this running node a member of ``peer``'s cluster (``stop_app``,
        ``join_cluster``, ``start_app``); returns the seconds it took. Raises
        ClusterPeerUnreachable (node left running alone) when the peer does not answer."""
        began = time.monotonic()
        for attempt in range(PING_ATTEMPTS):  # a busy peer may miss one
            answer = self.ctl("eval", f"net_adm:ping('{peer}').", check=False, timeout=timeout).stdout.strip()
            if answer == "pong":
                break
            time.sleep(attempt + 1)
        if answer != "pong":
            raise ClusterPeerUnreachable(
                f"cannot join the cluster of {peer}: it does not answer over TLS distribution on port {self.dist.port}",
                "check that it runs, that this machine reaches that port, and that both node "
                "certificates come from the same hub CA",
            )
        self.ctl("stop_app", timeout=timeout)
        try:
            self.ctl("join_cluster", peer, timeout=timeout)
        finally:
            self.ctl("start_app", timeout=timeout)
        return time.monotonic() - began

    def grow_quorum_queues(self, target: int = 3, timeout: float = 300.0) -> tuple[int, int]:
        """Add this node as a member of every quorum queue that has fewer than ``target``
        members and none here; returns (added, tried). Queues declared while the cluster
        was smaller otherwise keep their members where they were and die with them."""
        code = (
            f"N = '{self.nodename}', "
            "Ms = fun(Q) -> maps:get(nodes, amqqueue:get_type_state(Q)) end, "
            "Rs = [rabbit_quorum_queue:add_member(V, Name, N, 30000) "
            "|| Q <- rabbit_amqqueue:list(), amqqueue:get_type(Q) =:= rabbit_quorum_queue, "
            f"length(Ms(Q)) < {target}, not lists:member(N, Ms(Q)), "
            "{resource, V, queue, Name} <- [amqqueue:get_name(Q)]], "
            "{length([ok || ok <- Rs]), length(Rs)}."
        )
        out = self.ctl("eval", code, timeout=timeout).stdout.strip()
        found = re.fullmatch(r"\{(\d+),(\d+)\}", out)
        if found is None:
            raise BridgeError(f"unexpected answer growing quorum queues on {self.nodename}: {out}", None)
        return int(found[1]), int(found[2])

    def apply_partition_handling(self, timeout: float = 60.0) -> tuple[str, int, int]:
        """Set ``cluster_partition_handling`` on every running member to what the cluster's
        size calls for: ``pause_minority`` from :data:`PAUSE_MINORITY_FROM` members, else
        ``ignore`` (a two-node cluster's survivor would pause whenever its peer stops, as
        while a hub grows). Returns (mode, members, members set). RabbitMQ reads it at
        each node-down, so it applies at once; a stopped member gets it at its next start.
        See docs/decisions/cluster-partitions.md."""
        code = (
            "Ns = rabbit_nodes:all(), "
            f"M = case length(Ns) >= {PAUSE_MINORITY_FROM} of true -> pause_minority; false -> ignore end, "
            "{Rs, _} = rpc:multicall(rabbit_nodes:all_running(), application, set_env, "
            "[rabbit, cluster_partition_handling, M], 15000), "
            "{M, length(Ns), length([ok || ok <- Rs])}."
        )
        out = self.ctl("eval", code, timeout=timeout).stdout.strip()
        found = re.fullmatch(r"\{(pause_minority|ignore),(\d+),(\d+)\}", out)
        if found is None:
            raise BridgeError(f"unexpected answer setting partition handling on {self.nodename}: {out}", None)
        return found[1], int(found[2]), int(found[3])

    def forget(self, nodename: str) -> None:
        """``rabbitmqctl forget_cluster_node`` (the forgotten node must be stopped)."""
        self.ctl("forget_cluster_node", nodename, timeout=120)

    def cluster_status(self) -> ClusterStatus:
        """Members and running members, from ``rabbitmqctl cluster_status --formatter json``."""
        out = self.ctl("cluster_status", "--formatter", "json").stdout
        try:
            data = json.loads(out)
            return ClusterStatus(sorted(data["disk_nodes"] + data["ram_nodes"]), sorted(data["running_nodes"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise BridgeError(f"unexpected cluster_status output from {self.nodename}: {exc}", None) from exc
