"""Messaging bench (a): gateway delivery throughput into the no-op backend against a raw
pika manual-ack consumer with the same prefetch, both draining a pre-filled inbox queue (see
``bench/messaging.py`` for the method)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:  # run_all and u1_floor load these by path
    sys.path.insert(0, str(BENCH))

from bench_hosts import PYTHON, Bench, clean_env, noop_site  # noqa: E402

_RAW_CONSUMER = r"""
import json, sys, time, pika
uri, queue, n, prefetch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
conn = pika.BlockingConnection(pika.URLParameters(uri))
ch = conn.channel()
ch.basic_qos(prefetch_count=prefetch)
state = {"n": 0, "first": None, "last": None}
def on_message(channel, method, props, body):
    if state["first"] is None:
        state["first"] = time.time()
    channel.basic_ack(method.delivery_tag)
    state["n"] += 1
    if state["n"] >= n:
        state["last"] = time.time()
        channel.stop_consuming()
ch.basic_consume(queue, on_message)
ch.start_consuming()
print(json.dumps(state))
conn.close()
"""


def _fill(bench: Bench, queue_obj: Any, bodies: list[tuple[bytes, dict]]) -> None:
    """Declare ``queue_obj`` like the gateway does and publish the bodies (persistent, no
    confirms), then wait until the queue holds them all (passive declare)."""
    import pika

    from bridgecli.amqp import topology

    conn = bench.pika()
    try:
        ch = conn.channel()
        topology.declare(ch, *topology.SHARED_EXCHANGES, queue_obj)
        ch.queue_purge(queue_obj.name)
        for body, props in bodies:
            ch.basic_publish("", queue_obj.name, body, pika.BasicProperties(**props))
        deadline = time.monotonic() + 120
        while ch.queue_declare(queue_obj.name, passive=True).method.message_count < len(bodies):
            if time.monotonic() > deadline:
                raise RuntimeError(f"pre-fill of {queue_obj.name} did not reach {len(bodies)}")
            time.sleep(0.02)
    finally:
        conn.close()


def _delivered_span(db: Path, n: int, timeout: float) -> tuple[float, float]:
    """Wait until the gateway has ``n`` dedup records; return (first, last) received times."""
    deadline = time.monotonic() + timeout
    while True:
        count, first, last = 0, None, None
        if db.exists():  # read-only and closed at once: a lingering reader would stall the gateway's commits
            try:
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
                try:
                    count, first, last = conn.execute(
                        "SELECT COUNT(*), MIN(received), MAX(received) FROM messages"
                    ).fetchall()[0]
                finally:
                    conn.close()
            except sqlite3.Error:
                pass
        if count >= n:
            return first, last
        if time.monotonic() > deadline:
            raise RuntimeError(f"gateway delivered {count} of {n} within {timeout:g}s")
        time.sleep(0.05)


def _queue_empty(bench: Bench, name: str, timeout: float = 30) -> None:
    conn = bench.pika()
    try:
        ch = conn.channel()
        deadline = time.monotonic() + timeout
        while ch.queue_declare(name, passive=True).method.message_count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not empty after {timeout}s")
            time.sleep(0.05)
    finally:
        conn.close()


def gateway_round(
    bench: Bench,
    bodies_for: Callable[[str], list],
    n: int,
    profile_to: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> float:
    """One gateway drain on a fresh host (its environment plus ``extra_env``); returns msg/s."""
    from bridgecli.amqp import topology

    host = bench.host("tput", {"PYTHONPATH": noop_site(bench.root), **(extra_env or {})})
    gid = host.register("sink", "noop")
    _fill(bench, topology.inbox_queue(gid), bodies_for(gid))
    argv = None
    if profile_to is not None:
        argv = [PYTHON, "-m", "cProfile", "-o", str(profile_to), "-m", "bridgecli", "gateway"]
    host.start_gateway(argv)
    try:
        # broker-side polling first: reading the store while the gateway writes it would slow it
        _queue_empty(bench, topology.inbox_name(gid), timeout=300)
        first, last = _delivered_span(host.db, n, timeout=60)
    finally:
        host.stop_gateway()
    return (n - 1) / (last - first)


def _raw_round(bench: Bench, bodies_for: Callable[[str], list], n: int, prefetch: int) -> float:
    from bridgecli.amqp import topology

    raw_gid = str(uuid.uuid4())
    queue_obj = topology.inbox_queue(raw_gid)
    _fill(bench, queue_obj, bodies_for(raw_gid))
    proc = subprocess.run(
        [PYTHON, "-c", _RAW_CONSUMER, bench.node.uri, queue_obj.name, str(n), str(prefetch)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"raw consumer failed: {proc.stderr.strip()[-500:]}")
    state = json.loads(proc.stdout)
    conn = bench.pika()
    try:
        conn.channel().queue_delete(queue_obj.name)
    finally:
        conn.close()
    return (n - 1) / (state["last"] - state["first"])


def bodies(n: int) -> Callable[[str], list[tuple[bytes, dict]]]:
    from bridgecli.envelope import Envelope

    sender = str(uuid.uuid4())

    def make(recipient: str) -> list[tuple[bytes, dict]]:
        out = []
        for i in range(n):
            env = Envelope(
                kind="SEND",
                sender=sender,
                recipient=recipient,
                content=f"bench message {i:06d}",
                sender_label="bench",
                sender_host="bench",
            )
            out.append((env.to_bytes(), env.amqp_properties()))
        return out

    return make


def bench_delivery(bench: Bench, rounds: int, n: int) -> dict[str, Any]:
    """(a): medians over ``rounds`` alternating gateway / raw rounds."""
    probe = bench.host("cfg")
    prefetch = int(probe.bridge("config", "get", "messaging.prefetch").stdout.strip())
    bodies_for = bodies(n)
    gateway, raw = [], []
    for i in range(rounds):
        if i % 2:
            raw.append(_raw_round(bench, bodies_for, n, prefetch))
            gateway.append(gateway_round(bench, bodies_for, n))
        else:
            gateway.append(gateway_round(bench, bodies_for, n))
            raw.append(_raw_round(bench, bodies_for, n, prefetch))
    return {"gateway": gateway, "raw": raw, "prefetch": prefetch, "n": n}
