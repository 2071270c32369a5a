"""Messaging bench (c): the U1 round trip through two gateways (a worker long-polls on host
B and replies) against a raw pika request/reply with the same guarantees (see
``bench/messaging.py`` for the method). ``u1_floor`` runs both halves next to its floor."""

from __future__ import annotations

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

from _common import CpuPerRound  # noqa: E402
from bench_hosts import PYTHON, Bench, clean_env  # noqa: E402

_BRIDGE_WORKER = r"""
import sys
from pathlib import Path
from bridgecli.gateway.client import GatewayClient
sock, gid = Path(sys.argv[1]), sys.argv[2]
with GatewayClient.require(sock) as client:
    print("ready", flush=True)
    while True:
        # as `bridge poll` does: taken until confirmed (confirmed before acting on them)
        got = client.call("poll", timeout=None, gid=gid, wait=3600, limit=100, confirm=True)
        client.confirm_pending(got)
        for msg in got["messages"]:
            if msg["content"] == "stop":
                sys.exit(0)
            client.call("send", command="reply", msg_id=msg["msgId"], content="ok", sender=gid)
"""

_RAW_WORKER = r"""
import sys, pika
uri, queue = sys.argv[1], sys.argv[2]
conn = pika.BlockingConnection(pika.URLParameters(uri))
ch = conn.channel()
ch.queue_declare(queue, durable=True)
ch.confirm_delivery()
ch.basic_qos(prefetch_count=10)
def on_request(channel, method, props, body):
    if body == b"stop":
        channel.basic_ack(method.delivery_tag)
        channel.stop_consuming()
        return
    channel.basic_publish("", props.reply_to, b"ok", pika.BasicProperties(
        correlation_id=props.correlation_id, delivery_mode=2))
    channel.basic_ack(method.delivery_tag)
ch.basic_consume(queue, on_request)
print("ready", flush=True)
ch.start_consuming()
conn.close()
"""


def bridge_round_trips(
    bench: Bench,
    count: int,
    warmup: int,
    env_for: Callable[[str], dict[str, str]] | None = None,
    cpu: list[float] | None = None,
    before_stop: Callable[[Any, Any], None] | None = None,
) -> list[float]:
    """U1 round trips in ms; ``env_for(host name)`` adds to a host's environment; ``cpu`` gets
    the CPU ms the two gateways used per measured round trip; ``before_stop(a, b)`` sees the
    two hosts once the trips are done, their gateways still up."""
    from bridgecli.errors import NotFound
    from bridgecli.gateway.client import GatewayClient

    a, b = (bench.host(name, env_for(name) if env_for else None) for name in ("a", "b"))
    main_gid = a.register("main", "hold", role="main")
    worker_gid = b.register("worker", "hold")
    a.start_gateway()
    b.start_gateway()
    worker = subprocess.Popen(
        [PYTHON, "-c", _BRIDGE_WORKER, str(b.socket), worker_gid], env=b.env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        samples = []
        with GatewayClient.require(a.socket) as client:
            deadline = time.monotonic() + 30
            while True:  # until gateway A's roster announces the worker (no --force)
                try:
                    client.call(
                        "send",
                        command="send",
                        target=worker_gid,
                        content="warm-up",
                        sender=main_gid,
                        wait=30,
                        timeout=60,
                    )
                    break
                except NotFound:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            meter = CpuPerRound([host.gateway.pid for host in (a, b) if host.gateway is not None], cpu)
            for i in range(warmup + count):
                if i == warmup:
                    meter.start()
                began = time.perf_counter()
                # as `bridge send --wait` does: the reply is taken until the caller confirms it
                answer = client.call(
                    "send",
                    command="send",
                    target=worker_gid,
                    content=f"task {i}",
                    sender=main_gid,
                    wait=30,
                    timeout=60,
                    confirm=True,
                )
                if i >= warmup:
                    samples.append((time.perf_counter() - began) * 1000)
                client.confirm_pending(answer)  # after the reply is "printed", as the CLI does
            meter.stop(count)
            client.call("send", command="send", target=worker_gid, content="stop", sender=main_gid)
        worker.wait(30)
        if before_stop is not None:
            before_stop(a, b)
    finally:
        if worker.poll() is None:
            worker.kill()
        a.stop_gateway()
        b.stop_gateway()
    return samples


def raw_round_trips(bench: Bench, count: int, warmup: int) -> list[float]:
    import pika

    queue = f"bench.rpc.{uuid.uuid4().hex[:8]}"
    worker = subprocess.Popen(
        [PYTHON, "-c", _RAW_WORKER, bench.node.uri, queue], env=clean_env(), stdout=subprocess.PIPE, text=True
    )
    conn = bench.pika()
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        ch = conn.channel()
        ch.confirm_delivery()
        reply_queue = ch.queue_declare("", exclusive=True).method.queue
        state: dict[str, Any] = {"want": None, "got": False}

        def on_reply(channel, method, props, body):
            if props.correlation_id == state["want"]:
                state["got"] = True
            channel.basic_ack(method.delivery_tag)

        ch.basic_consume(reply_queue, on_reply)
        samples = []
        for i in range(warmup + count):
            state["want"], state["got"] = str(uuid.uuid4()), False
            began = time.perf_counter()
            ch.basic_publish(
                "",
                queue,
                f"task {i}".encode(),
                pika.BasicProperties(reply_to=reply_queue, correlation_id=state["want"], delivery_mode=2),
            )
            while not state["got"]:
                conn.process_data_events(time_limit=None)
            if i >= warmup:
                samples.append((time.perf_counter() - began) * 1000)
        ch.basic_publish("", queue, b"stop")
        worker.wait(30)
        ch.queue_delete(queue)
    finally:
        if worker.poll() is None:
            worker.kill()
        conn.close()
    return samples


def bench_round_trip(bench: Bench, count: int, rounds: int, warmup: int = 20) -> dict[str, Any]:
    """(c): ``count`` sequential round trips each through two gateways and through raw pika,
    in ``rounds`` alternating rounds (which goes first alternates too), so that the shared
    machine's load spikes hit both cases alike."""
    bridge: list[float] = []
    raw: list[float] = []
    per_round = -(-count // rounds)
    for i in range(rounds):
        cases = [(bridge, bridge_round_trips), (raw, raw_round_trips)]
        for samples, measure in cases[::-1] if i % 2 else cases:
            samples += measure(bench, per_round, warmup)
    return {"bridge": bridge, "raw": raw, "count": per_round * rounds, "rounds": rounds}
