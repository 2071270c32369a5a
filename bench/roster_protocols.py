"""Roster traffic by protocol, in one run on a private RabbitMQ node: per-entity heartbeats
against host frames, for G simulated gateways (``--gateways``, default 50,100) × E entities at
interval T — frames published and delivered per second against each protocol's formula, and a
joining gateway's time to a full view; with the listener figure (6 × 15, T = 1 s) first. Prints
a table, asserts nothing; method and figures in docs/roster.md. Heavy: not in run_all.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORKERS = 4
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from roster_sim import Worker  # noqa: E402


def _fleet(uri: str, root: Path, count: int, entities: int, interval: float, protocol: str) -> list[Worker]:
    hosts = [f"{protocol[0]}{i:03d}-{uuid.uuid4().hex[:4]}" for i in range(count)]
    workers = [
        Worker(uri, hosts[i::WORKERS], entities, interval, root / f"{protocol}{count}-{i}.log", protocol=protocol)
        for i in range(WORKERS)
        if hosts[i::WORKERS]
    ]
    for w in workers:
        try:
            w.wait_consuming(120)
        except RuntimeError:  # an overloaded broker: measure the part of the fleet that made it
            if w.proc.poll() is not None:
                raise
    return workers


def _rates(workers: list[Worker], seconds: float) -> tuple[float, float]:
    before = [dict(w.last) for w in workers]
    time.sleep(seconds)
    sent = received = 0.0
    for b, a in zip(before, [dict(w.last) for w in workers], strict=True):
        dt = a.get("t", 0) - b.get("t", 0)
        if dt > 0:
            sent += (a["sent"] - b["sent"]) / dt
            received += (a["received"] - b["received"]) / dt
    return sent, received


def measure(uri: str, root: Path, g: int, e: int, t: float, protocol: str, window: float) -> dict[str, Any]:
    workers = _fleet(uri, root, g, e, t, protocol)
    try:
        time.sleep(t)
        published, delivered = _rates(workers, window)
        per_host = e + 1 if protocol == "entity" else 1
        probe = Worker(uri, [f"new-{uuid.uuid4().hex[:6]}"], e, t, root / "probe.log", (g + 1) * e, protocol)
        try:
            event = probe.wait_event("converged", 6 * t + 10)
        finally:
            probe.stop()
        joined = (event["converged_at"] - event["consuming_at"]) / t if event else float("nan")
        return {
            "protocol": protocol,
            "G": g,
            "consuming": sum(int(w.last.get("consuming", 0)) for w in workers),
            "published": published,
            "delivered": delivered,
            "formula_published": g * per_host / t,
            "formula_delivered": g * g * per_host / t,
            "join_intervals": joined,
            "load1": os.getloadavg()[0],
        }
    finally:
        for w in workers:
            w.stop()
        time.sleep(2)


def listen(uri: str, root: Path, seconds: float) -> dict[str, Any]:
    """6 x 15 at T = 1 s with host frames: frames per host per interval on a roster.# queue."""
    import pika

    workers = _fleet(uri, root, 6, 15, 1.0, "host")
    try:
        connection = pika.BlockingConnection(pika.URLParameters(uri))
        channel = connection.channel()
        queue = channel.queue_declare("", exclusive=True).method.queue
        channel.queue_bind(queue, "bridge.roster", routing_key="roster.#")
        time.sleep(1.0)
        channel.queue_purge(queue)
        counts: dict[str, int] = {}
        deadline = time.monotonic() + seconds
        for method, _props, body in channel.consume(queue, auto_ack=True, inactivity_timeout=0.2):
            if method is not None:
                host = json.loads(body)["host"]
                counts[host] = counts.get(host, 0) + 1
            if time.monotonic() >= deadline:
                break
        connection.close()
        frames = sum(counts.values())
        return {"hosts": len(counts), "frames_per_s": frames / seconds, "per_host_per_interval": frames / 6 / seconds}
    finally:
        for w in workers:
            w.stop()


def _declare_shared(uri: str) -> None:
    """The exchanges a gateway declares on its first connect (there is no real one here)."""
    import pika

    from bridgecli.amqp import topology

    connection = pika.BlockingConnection(pika.URLParameters(uri))
    try:
        topology.declare_shared(connection.channel())
    finally:
        connection.close()


def run(argv: list[str] | None = None) -> list[dict[str, Any]]:
    from bridgecli.localbroker import LocalNode

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateways", default="50,100")
    parser.add_argument("--entities", type=int, default=40)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--protocols", default="host,entity", help="which, in this order")
    parser.add_argument("--no-listen", action="store_true", help="skip the 6 x 15 listener measurement")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="brproto", dir="/tmp"))
    node = LocalNode(root / "node")
    rows: list[dict[str, Any]] = []
    try:
        node.start()
        _declare_shared(node.uri)
        if not args.no_listen:
            print(json.dumps({"listen_6x15_T1": listen(node.uri, root, 10.0)}), flush=True)
        sizes = [int(g) for g in args.gateways.split(",")]
        for protocol in args.protocols.split(","):
            for g in sizes:
                row = measure(node.uri, root, g, args.entities, args.interval, protocol, args.window)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        node.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'protocol':8} {'G':>4} {'published/s':>12} {'delivered/s':>12} {'formula':>10} {'join (T)':>9}")
    for r in rows:
        print(
            f"{r['protocol']:8} {r['G']:>4} {r['published']:>12.0f} {r['delivered']:>12.0f} "
            f"{r['formula_delivered']:>10.0f} {r['join_intervals']:>9.2f}"
        )
    for g in {r["G"] for r in rows}:
        pair = {r["protocol"]: r for r in rows if r["G"] == g}
        if len(pair) == 2:
            print(f"G={g}: per-entity/host deliveries = {pair['entity']['delivered'] / pair['host']['delivered']:.1f}x")
    return rows


if __name__ == "__main__":
    run()
