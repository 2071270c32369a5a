"""A three-node RabbitMQ cluster on loopback (``classic_config`` peer discovery).

Where one broker node is not enough, the answer is a RabbitMQ cluster with quorum inboxes,
never our own replication. The nodes are plain :class:`LocalNode` processes with distinct
AMQP/dist ports, one shared Erlang cookie, and ``classic_config`` peer discovery so they form
the cluster by configuration alone when started together.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from bridgecli.localbroker import LocalNode, free_port, stop_epmd_if_idle

if TYPE_CHECKING:
    from tests.multihost.scenarios import Outcome


class Cluster:
    """Three clustered nodes; ``uris`` is what goes into ``broker.uri`` (comma-separated)."""

    def __init__(self, size: int = 3) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bcl", dir="/tmp"))
        tag = f"bc{os.getpid()}{secrets.token_hex(2)}"
        names = [f"{tag}n{i}@localhost" for i in range(1, size + 1)]
        taken: set[int] = set()
        ports = []
        for _ in names:
            amqp, dist = free_port(taken), 0
            taken.add(amqp)
            dist = free_port(taken)
            taken.add(dist)
            ports.append((amqp, dist))
        peers = ["cluster_formation.peer_discovery_backend = classic_config"]
        peers += [f"cluster_formation.classic_config.nodes.{i} = {n}" for i, n in enumerate(names, 1)]
        cookie = secrets.token_hex(16).upper()
        self.nodes: list[LocalNode] = []
        for name, (amqp, dist) in zip(names, ports, strict=True):
            node = LocalNode(
                self.root / name.split("@")[0], nodename=name, amqp_port=amqp, dist_port=dist, extra_conf=peers
            )
            node.home.mkdir(parents=True, exist_ok=True)
            cookie_file = node.home / ".erlang.cookie"
            cookie_file.write_text(cookie)
            cookie_file.chmod(0o400)
            self.nodes.append(node)

    @property
    def uris(self) -> list[str]:
        return [node.uri for node in self.nodes]

    @property
    def uri(self) -> str:
        return ",".join(self.uris)

    def start(self, timeout: float = 180.0) -> None:
        """Start all nodes at once (classic_config formation waits for its peers)."""
        errors: list[BaseException] = []

        def boot(node: LocalNode) -> None:
            try:
                node.start(timeout)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=boot, args=(n,)) for n in self.nodes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def running_nodes(self, via: LocalNode | None = None) -> list[str]:
        """Cluster members the (first live) node reports as running."""
        node = via or self.live()[0]
        out = node.ctl("eval", "rabbit_nodes:all_running().").stdout
        return [n for n in self.names if n in out]

    @property
    def names(self) -> list[str]:
        return [node.nodename for node in self.nodes]

    def live(self) -> list[LocalNode]:
        return [node for node in self.nodes if node.is_running()]

    def node(self, name: str) -> LocalNode:
        return next(n for n in self.nodes if n.nodename == name)

    def leader(self, queue: str) -> str:
        """The node holding ``queue``'s quorum leader (``rabbitmqctl list_queues name leader``)."""
        out = self.live()[0].ctl("list_queues", "name", "leader", "-q", "--no-table-headers").stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == queue:
                return parts[1]
        raise AssertionError(f"queue {queue} not listed: {out[-500:]}")

    def wait_until_safe_to_kill(self, name: str, timeout: float = 120.0) -> float:
        """Wait until killing ``name`` leaves every quorum queue a majority of online members
        (RabbitMQ's own pre-shutdown check, ``rabbitmq-queues check_if_node_is_quorum_critical``);
        returns the seconds waited. Why: a node restarted by the previous scenario may still be
        bringing its queue members back, and killing another node meanwhile leaves a queue
        with one live member of three — no quorum, so the broker refuses every publish to it
        until the restarted member has caught up. That is the broker's documented behaviour,
        not a failover of ours; a scenario that means to kill *one* node waits for this."""
        import time

        began, first = time.monotonic(), True
        while True:
            result = self.node(name).ctl("check_if_node_is_quorum_critical", check=False, tool="rabbitmq-queues")
            if result.returncode == 0:  # 0.0: it was safe at the first check
                return 0.0 if first else time.monotonic() - began
            first = False
            if time.monotonic() - began > timeout:
                raise AssertionError(
                    f"{name} stayed quorum-critical for {timeout:g}s: {(result.stdout or result.stderr).strip()[-300:]}"
                )
            time.sleep(1.0)

    def kill9(self, name: str) -> None:
        """Crash a node: SIGKILL its whole process group (no clean shutdown)."""
        node = self.node(name)
        if node.pgid:
            try:
                os.killpg(node.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if node.process is not None:
            node.process.wait(timeout=20)
            node.process = None

    def stop(self) -> None:
        for node in self.nodes:
            try:
                node.stop(timeout=20)
            except Exception:
                pass
        shutil.rmtree(self.root, ignore_errors=True)
        stop_epmd_if_idle()


def broker_view(cluster: Cluster, queue: str, gid: str) -> dict[str, str]:
    """What the surviving nodes say about ``queue`` when sends did not resume after a kill:
    its leader and online members (``rabbitmqctl list_queues``), and whether a publish from a
    *fresh* connection to each live node, routed exactly like a gateway's (``bridge.msg``,
    key = gid, persistent, mandatory, confirmed), is accepted. An ack there while our
    gateway's publishes are nacked would mean the gateway keeps a bad channel; a nack means the
    broker refuses everyone. (The probe's body is not an envelope, so the receiving gateway
    dead-letters it: it never reaches the entity.)"""
    import pika
    import pika.exceptions

    from bridgecli.amqp import topology

    view: dict[str, str] = {}
    live = cluster.live()
    if not live:
        return view
    listed = (
        live[0].ctl("list_queues", "name", "leader", "online", "state", "-q", "--no-table-headers", check=False).stdout
    )
    view["queue"] = next(
        (" ".join(line.split()[1:]) for line in listed.splitlines() if line.startswith(queue)), "not listed"
    )
    for node in live:
        try:
            connection = pika.BlockingConnection(pika.URLParameters(node.uri))
        except pika.exceptions.AMQPError as exc:
            view[f"fresh publish via {node.nodename}"] = f"cannot connect ({type(exc).__name__})"
            continue
        try:
            channel = connection.channel()
            channel.confirm_delivery()
            channel.basic_publish(
                topology.MSG, gid, b"failover probe", pika.BasicProperties(delivery_mode=2), mandatory=True
            )
            view[f"fresh publish via {node.nodename}"] = "confirmed"
        except pika.exceptions.NackError:
            view[f"fresh publish via {node.nodename}"] = "nacked"
        except pika.exceptions.UnroutableError:
            view[f"fresh publish via {node.nodename}"] = "unroutable"
        except pika.exceptions.AMQPError as exc:
            view[f"fresh publish via {node.nodename}"] = f"{type(exc).__name__}: {exc}"[:160]
        finally:
            if connection.is_open:
                connection.close()
    return view


def leader_failover(cluster: Cluster, root: Path, mode: str = "leader", timeout: float = 150.0) -> Outcome:
    """Two loopback hosts on the cluster with quorum inboxes; SIGKILL a node in the middle of
    a steady send; count what arrives.

    ``mode="leader"``: the receiver's inbox leader lives on node 3 (its inbox was declared
    through node 3) while the sender's gateway is on node 1 and the receiver's on node 2;
    node 3 is killed, a follower takes over the leadership.
    ``mode="gateway-node"``: node 1, where both gateways are connected (and where ``bridge.dlq``
    and the ``control.<host>`` queues were declared — quorum queues here, so they survive it), is
    killed; the gateways must fail over to the next URI of ``broker.uri``.
    """
    import time
    import uuid

    from tests.multihost.helpers import exec_sink, read_sink, wait_for
    from tests.multihost.scenarios import Outcome
    from tests.support.hosts import Host

    n1, n2, n3 = cluster.uris
    env = {"BRIDGE_MESSAGING_INBOX_QUEUE_TYPE": "quorum", "BRIDGE_BROKER_HEARTBEAT": "2"}
    tag = uuid.uuid4().hex[:6]
    receiver_uris = [n2, n1, n3] if mode == "leader" else [n1, n2, n3]
    a = Host(f"qa-{tag}", root / "a", ",".join([n1, n2, n3]), env)
    b = Host(f"qb-{tag}", root / "b", ",".join(receiver_uris), env)
    sink = root / "sink.jsonl"
    try:
        a.register("main", role="main")
        a.start_gateway()  # declares the shared bridge.dlq (quorum) through node 1
        # the inbox is declared (so gets its quorum leader) through node 3 in "leader" mode
        worker = b.bridge(
            "register",
            "--label",
            "worker",
            "--deliver",
            exec_sink(sink),
            check=True,
            env={"BRIDGE_BROKER_URI": n3 if mode == "leader" else n1},
        ).stdout.strip()
        b.start_gateway()
        queue = f"agent.{worker}.inbox"
        victim = cluster.leader(queue) if mode == "leader" else cluster.names[0]
        waited_for_quorum = cluster.wait_until_safe_to_kill(victim)
        sent: set[str] = set()
        errors: list[str] = []
        stop = threading.Event()

        killed_at: list[float] = []  # set when the node is killed
        resumed: list[float] = []  # seconds from the kill to the first batch confirmed after it

        def sender() -> None:
            n = 0
            while not stop.is_set():
                lines = "\n".join(f"q #{n + i}" for i in range(5)) + "\n"
                n += 5
                started = time.monotonic()
                proc = a.bridge("send", worker, "-", "--lines", "--from", "main", "--force", input=lines)
                if proc.returncode == 0:
                    sent.update(proc.stdout.split())
                    if killed_at and started > killed_at[0] and not resumed:
                        resumed.append(time.monotonic() - killed_at[0])
                else:
                    errors.append(proc.stderr.strip()[-200:])
                time.sleep(0.1)

        thread = threading.Thread(target=sender, daemon=True)
        thread.start()
        wait_for(lambda: len(sent) >= 20, 60, 0.1, "first confirmed messages")
        marks = {h.name: len(h.log_path.read_text(errors="replace")) for h in (a, b)}
        t_kill = time.monotonic()
        killed_at.append(t_kill)
        confirmed_at_kill, delivered_at_kill = len(sent), len(read_sink(sink))
        cluster.kill9(victim)
        new_leader = None
        reconnect: dict[str, float | None] = {a.name: None, b.name: None}
        lost_conn: dict[str, bool] = {a.name: False, b.name: False}
        stopping_at = None
        deadline = t_kill + timeout
        while time.monotonic() < deadline:
            for host in (a, b):
                text = host.log_path.read_text(errors="replace")[marks[host.name] :]
                lost_conn[host.name] = lost_conn[host.name] or "broker connection lost" in text
                if reconnect[host.name] is None and "connected to broker" in text:
                    reconnect[host.name] = round(time.monotonic() - t_kill, 1)
            if new_leader is None:
                try:
                    lead = cluster.leader(queue)
                    new_leader = lead if lead != victim else None
                except Exception:
                    pass
            if (
                stopping_at is None
                and new_leader
                and len(sent) >= 40
                and all(reconnect[h] is not None for h in lost_conn if lost_conn[h])
            ):
                stopping_at = time.monotonic() + 2.0  # keep sending through the survivors a while
            if stopping_at is not None and time.monotonic() > stopping_at:
                stop.set()
            if stop.is_set() and not thread.is_alive() and sent <= {m["msgId"] for m in read_sink(sink)}:
                break
            time.sleep(0.2)
        stop.set()
        thread.join(60)
        t_done = time.monotonic()
        got = [m["msgId"] for m in read_sink(sink)]
        unique = set(got)
        what = (
            "kill -9 the node holding the inbox's quorum leader"
            if mode == "leader"
            else "kill -9 the node the gateways are connected to"
        )
        outcome = Outcome(
            fault=f"cluster: {what}",
            sent=len(sent),
            delivered=len(unique & sent),
            lost=len(sent - unique),
            duplicated=len(got) - len(unique),
            unconfirmed_delivered=len(unique - sent),
            send_errors=len(errors),
        )
        gave_up = any(lost_conn[h] and reconnect[h] is None for h in lost_conn) or not resumed
        outcome.times = {
            ("gave up after" if gave_up else "all delivered after kill"): round(t_done - t_kill, 1),
            "sends confirmed again after kill": round(resumed[0], 1) if resumed else None,
        }
        # just before the kill: how far the steady send had got (the burst it interrupted)
        outcome.observed.update({"confirmed at kill": confirmed_at_kill, "delivered at kill": delivered_at_kill})
        for host, label in ((a, "sender"), (b, "receiver")):
            if lost_conn[host.name]:
                outcome.times[f"{label} gateway reconnect"] = reconnect[host.name]
        if waited_for_quorum:
            outcome.notes.append(f"waited {waited_for_quorum:.0f} s until {victim} was not quorum-critical")
        if mode == "leader":
            outcome.notes.insert(0, f"leader {victim} -> {new_leader}")
        else:
            outcome.notes.append(f"killed {victim}; inbox leader now {new_leader}")
            failing = [line for line in b.log().splitlines() if "home node" in line][-1:]
            if failing:
                outcome.notes.append("receiver gateway: " + failing[0].split("error=", 1)[-1][:200])
        if not resumed:
            outcome.notes.append(
                "no send was confirmed after the kill, although the gateways had reconnected"
                if all(reconnect[h] is not None for h in lost_conn if lost_conn[h])
                else "no send was confirmed after the kill"
            )
            # whose refusal is it: the broker's to everyone, or only to our gateway's channel?
            view = broker_view(cluster, queue, worker)
            outcome.observed.update(view)
            outcome.notes.extend(f"{what}: {answer}" for what, answer in view.items())
        renewed = a.log_path.read_text(errors="replace")[marks[a.name] :].count("publish channel renewed after a nack")
        if renewed:
            outcome.notes.append(f"the sender's gateway renewed its publish channel after a nack {renewed} time(s)")
        if errors:
            outcome.notes.append(
                f"{len(errors)} send batches refused (first: {errors[0][:120]}; last: {errors[-1][:120]})"
            )
        return outcome
    finally:
        a.close()
        b.close()
