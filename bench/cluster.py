"""A three-node RabbitMQ cluster with quorum inboxes against one node with classic inboxes:
(1) U1 p50/p90 (``messaging_round_trip``'s method) with the two gateways on different nodes
and on the same node, and on one node with quorum inboxes (queue type apart from replication);
(2) the time until a steady `bridge send` loop is confirmed, and delivered, again after kill -9
of the sender's node, against a plain close of that node's connections. Loopback, minutes: not
in run_all.py. Method and figures: docs/reliability.md ("Cluster: U1 and failover, measured").

    .venv/bin/python bench/cluster.py [--rounds 5] [--trips 200] [--failovers 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for entry in (str(BENCH), str(ROOT)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from _common import median, pct, ratio_cell  # noqa: E402
from bench_hosts import Bench, Host  # noqa: E402
from messaging_round_trip import bridge_round_trips  # noqa: E402

from bridgecli.localbroker import LocalNode  # noqa: E402
from tests.multihost.cluster import Cluster  # noqa: E402

QUORUM = {"BRIDGE_MESSAGING_INBOX_QUEUE_TYPE": "quorum"}
ONE_NODE = "one node, classic inboxes"
ONE_QUORUM = "one node, quorum inboxes"
SPLIT = "3-node cluster, quorum inboxes, A on node 1, B on node 2"
SAME = "3-node cluster, quorum inboxes, A and B on node 1"


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] load {os.getloadavg()[0]:.2f}: {text}", file=sys.stderr, flush=True)


def u1_cases(cluster: Cluster, quorum_node: LocalNode) -> dict[str, Callable[[str], dict[str, str]]]:
    """Each case's environment for host "a" (the asker) and "b" (the worker)."""
    n1, n2, n3 = cluster.uris
    a_first, b_first = ",".join([n1, n2, n3]), ",".join([n2, n1, n3])
    return {
        ONE_NODE: lambda name: {},
        ONE_QUORUM: lambda name: {**QUORUM, "BRIDGE_BROKER_URI": quorum_node.uri},
        SPLIT: lambda name: {**QUORUM, "BRIDGE_BROKER_URI": a_first if name == "a" else b_first},
        SAME: lambda name: {**QUORUM, "BRIDGE_BROKER_URI": a_first},
    }


def measure_u1(
    bench: Bench, cluster: Cluster, quorum_node: LocalNode, rounds: int, trips: int
) -> dict[str, list[float]]:
    """``trips`` U1 round trips per case and round; the case that goes first rotates."""
    cases = u1_cases(cluster, quorum_node)
    names = list(cases)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            log(f"U1 round {i + 1}/{rounds}: {name}")
            samples[name] += bridge_round_trips(bench, trips, 20, env_for=cases[name])
    return samples


class Traffic:
    """Host A sends to B's worker with `bridge send` in a loop (each run waits for the
    broker's confirm); a poller on B's gateway notes when each message arrives."""

    def __init__(self, a: Host, b: Host, worker: str) -> None:
        self.a, self.b, self.worker = a, b, worker
        self.sends: list[tuple[int, float, float, int]] = []  # (n, started, ended, exit code)
        self.arrived: dict[int, float] = {}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._send, self._poll)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _send(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            began = time.monotonic()
            proc = self.a.bridge("send", self.worker, f"m{n}", "--from", "main", "--force", check=False)
            self.sends.append((n, began, time.monotonic(), proc.returncode))
            time.sleep(0.02)

    def _poll(self) -> None:
        from bridgecli.gateway.client import GatewayClient

        with GatewayClient.require(self.b.socket) as client:
            while not self.stop.is_set():
                got = client.call("poll", timeout=None, gid=self.worker, wait=1, limit=100, confirm=True)
                now = time.monotonic()
                client.confirm_pending(got)
                for msg in got["messages"]:
                    self.arrived.setdefault(int(msg["content"][1:]), now)

    def confirmed(self) -> set[int]:
        return {n for n, _, _, rc in list(self.sends) if rc == 0}

    def wait_flowing(self, after: float, count: int = 5, timeout: float = 120.0) -> None:
        """Until ``count`` sends started after ``after`` were confirmed and delivered."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            fresh = {n for n, began, _, rc in list(self.sends) if rc == 0 and began > after}
            if len(fresh & set(self.arrived)) >= count:
                return
            time.sleep(0.1)
        raise RuntimeError(f"traffic did not flow within {timeout:g}s: {self.a.log()[-800:]}")

    def recovery(self, fault_at: float, timeout: float = 90.0) -> tuple[float, float, int]:
        """Seconds from ``fault_at`` until the first send started after it was confirmed, and
        until the first such send reached B; and how many sends failed in between."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            after = [(n, ended) for n, began, ended, rc in list(self.sends) if rc == 0 and began > fault_at]
            arrivals = [self.arrived[n] for n, _ in after if n in self.arrived]
            if after and arrivals:
                failed = sum(1 for _, began, _, rc in list(self.sends) if rc != 0 and began > fault_at - 1)
                return after[0][1] - fault_at, min(arrivals) - fault_at, failed
            time.sleep(0.05)
        raise RuntimeError(f"no send confirmed and delivered {timeout:g}s after the fault: {self.a.log()[-800:]}")

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


#: what a kill -9 of node 1 drops, without the kill: every client connection to node 1
CLOSE_LOCAL = (
    '[rabbit_networking:close_connection(P, "bench: plain close") || P <- rabbit_networking:connections_local()].'
)


def check_placement(cluster: Cluster, a: Host, b: Host) -> None:
    """Raise unless all of A's gateway connections are on node 1 and all of B's on node 2."""
    out = cluster.nodes[1].ctl("list_connections", "port", "client_properties", "-q", "--no-table-headers").stdout
    where: dict[str, set[int]] = {a.name: set(), b.name: set()}
    for line in out.splitlines():
        for host in (a, b):
            if f"bridge-gateway-{host.name}" in line:
                where[host.name].add(int(line.split()[0]))
    want = {a.name: {cluster.nodes[0].port}, b.name: {cluster.nodes[1].port}}
    if where != want:
        raise RuntimeError(f"gateway connections on ports {where}, expected {want}")


def measure_failover(bench: Bench, cluster: Cluster, repeats: int) -> dict[str, Any]:
    """``repeats`` times: close host A's connections on node 1 (baseline), then kill -9 node 1
    (A's node; B and B's inbox leader are on node 2), restart it and wait until it is back in
    the cluster and not quorum-critical, and restart A's gateway so that it is on node 1 again."""
    n1, n2, n3 = cluster.uris
    node1 = cluster.nodes[0]
    a = bench.host("fa", {**QUORUM, "BRIDGE_BROKER_URI": ",".join([n1, n2, n3])})
    b = bench.host("fb", {**QUORUM, "BRIDGE_BROKER_URI": ",".join([n2, n1, n3])})
    a.register("main", "hold", role="main")
    worker = b.register("worker", "hold")
    a.start_gateway()
    b.start_gateway()
    traffic = Traffic(a, b, worker)
    out: dict[str, Any] = {"kill": [], "close": [], "rejoin": [], "failed": [], "notes": []}
    out["leader"] = cluster.leader(f"agent.{worker}.inbox")
    traffic.start()
    try:
        for i in range(repeats):
            traffic.wait_flowing(time.monotonic())
            check_placement(cluster, a, b)
            log(f"failover {i + 1}/{repeats}: close every connection on node 1 (A's)")
            node1.ctl("eval", CLOSE_LOCAL)
            closed_at = time.monotonic()  # the connections were closed just before it returned
            out["close"].append(traffic.recovery(closed_at))
            traffic.wait_flowing(time.monotonic())
            waited = cluster.wait_until_safe_to_kill(node1.nodename)
            if waited:
                out["notes"].append(f"waited {waited:.0f} s for node 1 not to be quorum-critical")
            check_placement(cluster, a, b)
            log(f"failover {i + 1}/{repeats}: kill -9 node 1")
            killed_at = time.monotonic()
            cluster.kill9(node1.nodename)
            out["kill"].append(traffic.recovery(killed_at))
            traffic.wait_flowing(time.monotonic())
            began = time.monotonic()
            node1.start(180, keep_ports=True)
            while sorted(cluster.running_nodes(cluster.nodes[1])) != sorted(cluster.names):
                time.sleep(0.5)
            cluster.wait_until_safe_to_kill(node1.nodename, timeout=180)
            out["rejoin"].append(time.monotonic() - began)
            log(f"node 1 back and not quorum-critical after {out['rejoin'][-1]:.1f}s; A back to node 1")
            a.stop_gateway()
            a.start_gateway()
        traffic.wait_flowing(time.monotonic())
    finally:
        traffic.close()
    time.sleep(2)  # the last confirmed sends still on their way
    confirmed = traffic.confirmed()
    out["b_lost"] = b.log_path.read_text(errors="replace").count("broker connection lost")
    out["sent"], out["lost"] = len(confirmed), len(confirmed - set(traffic.arrived))
    a.stop_gateway()
    b.stop_gateway()
    return out


def rows_for(u1: dict[str, list[float]], fo: dict[str, Any], trips: int, rounds: int, load: str) -> list[dict]:
    base = u1[ONE_NODE]
    each = f"{trips} round trips per case in each of {rounds} rotated rounds; {load}"
    rows = []
    for name in (SPLIT, SAME, ONE_QUORUM):
        for label, q in (("p50", 0.5), ("p90", 0.9)):
            value, ref = pct(u1[name], q), pct(base, q)
            met = "met" if value / ref <= 1.5 else "missed"
            goal = f"; goal <= 1.5x: {met}" if (name, label) == (SPLIT, "p50") else ""
            rows.append(
                {
                    "metric": f"U1 {label}, {name}",
                    "value": round(value, 2),
                    "unit": "ms",
                    "baseline": f"{ONE_NODE} {ref:.2f} ms",
                    "ratio": round(value / ref, 2),
                    "note": each + goal,
                }
            )
    kills, closes = fo["kill"], fo["close"]
    runs = len(kills)
    for idx, what in ((0, "sends confirmed again"), (1, "B receives again")):
        k, c = median(r[idx] for r in kills), median(r[idx] for r in closes)
        goal = "; goal < 5 s: " + ("met" if k < 5 else "missed")
        rows.append(
            {
                "metric": f"kill -9 of A's node -> {what}",
                "value": round(k, 2),
                "unit": "s",
                "baseline": f"close of A's connections -> {what} {c:.2f} s",
                "ratio": round(k / c, 2) if c > 0 else None,
                "note": f"median of {runs}; kills "
                + ", ".join(f"{r[idx]:.2f}" for r in kills)
                + "; closes "
                + ", ".join(f"{r[idx]:.2f}" for r in closes)
                + goal,
            }
        )
    rows[-1]["note"] += (
        f"; failed sends per kill {', '.join(str(r[2]) for r in kills)}, per close "
        f"{', '.join(str(r[2]) for r in closes)}; {fo['sent']} confirmed, {fo['lost']} lost; "
        f"B's gateway lost its connection {fo['b_lost']} times; "
        f"node 1 back and not quorum-critical after {', '.join(f'{s:.0f}' for s in fo['rejoin'])} s; {load}"
    )
    return [{"benchmark": "cluster", **row} for row in rows]


def run(rounds: int, trips: int, failovers: int) -> list[dict[str, Any]]:
    started = os.getloadavg()[0]
    with Bench() as bench:
        cluster = Cluster()
        quorum_node = LocalNode(bench.root / "quorum-node")
        try:
            log("starting two single nodes and the 3-node cluster")
            quorum_node.start()
            cluster.start()
            u1 = measure_u1(bench, cluster, quorum_node, rounds, trips)
            fo = measure_failover(bench, cluster, failovers)
        finally:
            for host in bench.hosts:
                host.stop_gateway()
            quorum_node.stop()
            cluster.stop()
    load = f"load {started:.2f} -> {os.getloadavg()[0]:.2f} (1-min avg, shared 2-core VM)"
    rows = rows_for(u1, fo, trips, rounds, load)
    rows[-1]["note"] += f"; B's inbox leader {fo['leader'].split('@')[0][-2:]}"
    if fo["notes"]:
        rows[-1]["note"] += "; " + "; ".join(fo["notes"])
    return rows


def cli() -> int:
    """Not called ``main``: bench/run_all.py runs every script's ``main``, and this one takes
    minutes and three broker nodes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="U1 rounds (each case once per round)")
    parser.add_argument("--trips", type=int, default=200, help="U1 round trips per case and round")
    parser.add_argument("--failovers", type=int, default=3, help="kills of node 1 (and closes)")
    args = parser.parse_args()
    rows = run(args.rounds, args.trips, args.failovers)
    print("| metric | value | unit | baseline | ratio | note |\n| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        cells = [row["metric"], row["value"], row["unit"], row["baseline"], ratio_cell(row), row["note"]]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(cli())
