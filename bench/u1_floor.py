"""How low can U1 go in Python? The gateway's round trip next to a single-threaded floor and
raw pika, in interleaved rounds (goals: p50 <= 1.15x the floor and <= 3x raw, p99 <= 1.5x the
floor's p99). What the floor does: docs/bench-methods.md. Asserts nothing.
Run: ``.venv/bin/python bench/u1_floor.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from _common import CpuPerRound, median, pct  # noqa: E402
from bench_hosts import PYTHON, Bench, clean_env  # noqa: E402
from messaging_round_trip import bridge_round_trips, raw_round_trips  # noqa: E402

_RELAY = r"""
import json, logging, socket, sys, time
from pathlib import Path
import pika
from pika.adapters.select_connection import IOLoop
from bridgecli import envelope as env_mod, messaging
from bridgecli.amqp import topology
from bridgecli.amqp.publisher import amqp_message
from bridgecli.gateway import log as glog
from bridgecli.hoststate.store import HELD, TAKEN, Store

uri, path, my_gid, db_path, log_path = sys.argv[1:6]
marks = open(sys.argv[6], "a", buffering=1) if len(sys.argv) > 6 else None  # bench/u1_hops.py


def mark(label):
    if marks is not None:
        marks.write(f"{time.monotonic_ns()} {label}\n")


logging.basicConfig(filename=log_path, level=logging.INFO)
logger = logging.getLogger("bridgecli.gateway")
store = Store(Path(db_path))
store.checkpoint_in_background()
loop = IOLoop()
state = {"pub": None, "cons": None, "tag": 0}
reply_waiters, poll_waiter, in_flight, recent = {}, [], {}, {}
unacked = []
ACK_DELAY, ACK_GROUP = 0.025, 32


def respond(client, obj):
    client.sendall(json.dumps(obj).encode() + b"\n")


def on_message(channel, method, props, body):
    mark("io.msg")
    env = env_mod.parse(body, max_content_bytes=1 << 20, keep_raw=True)
    client, answer = reply_waiters.pop(env.in_reply_to, None), "reply"
    if client is None and poll_waiter:
        client, answer = poll_waiter.pop(), "poll"
    tx = store.begin()
    taken = store.record(env, TAKEN if client is not None else HELD, tx=tx)  # the client confirms it
    tx.commit()
    if client is not None and taken:
        recent[env.msg_id] = env
        if answer == "reply":
            respond(client, {"ok": True, "reply": {"msgId": env.msg_id, "content": env.content}})
        else:
            respond(client, {"ok": True, "messages": [{"msgId": env.msg_id, "content": env.content}]})
        mark("answered")
    # as the gateway: acks wait for a sync (power-safe, whatever the store's settings are), and
    # one sync serves what came in the last 25 ms, or 32 deliveries (gateway/burst.py)
    if not unacked:
        loop.call_later(ACK_DELAY, sync_and_ack)
    unacked.append((channel, method.delivery_tag))
    if len(unacked) >= ACK_GROUP:
        sync_and_ack()
    glog.event(logger, "delivered", kind=env.kind, msg=env.msg_id, sender=env.sender[:8])


def sync_and_ack():
    if not unacked:
        return
    store.sync()
    channel, last = unacked[-1]
    unacked.clear()
    channel.basic_ack(last, multiple=True)


def on_confirm(frame):
    tag, multiple = frame.method.delivery_tag, frame.method.multiple
    for done in ([t for t in in_flight if t <= tag] if multiple else [tag]):
        item = in_flight.pop(done, None)
        if item is not None:
            respond(*item)


def handle(client, request):
    mark(f"req.{request['op']}")
    ident = messaging.Identity(my_gid, "relay")
    if request["op"] == "confirm":  # the two-phase poll: taken until the client has them
        respond(client, {"ok": True, "confirmed": store.confirm(request["msg_ids"])})
        return
    if request["op"] == "poll":
        held = store.drain(my_gid, mark=TAKEN)
        if held:
            respond(client, {"ok": True, "messages": [{"msgId": s.envelope.msg_id, "content": s.envelope.content}
                                                      for s in held]})
        else:
            poll_waiter.append(client)
        return
    if request["op"] == "reply":
        original = recent.pop(request["msg_id"], None) or messaging.original_message(store, request["msg_id"])
        env = messaging.compose("REPLY", ident, original.sender, request["content"], host="floor",
                                max_content_bytes=1 << 20, in_reply_to=original.msg_id)
    else:
        env = messaging.compose("SEND", ident, request["target"], request["content"], host="floor",
                                max_content_bytes=1 << 20)
    exchange, key, body, props = amqp_message(env, None)
    state["pub"].basic_publish(exchange, key, body, props, mandatory=True)
    mark("pub")
    state["tag"] += 1
    glog.event(logger, "sent", kind=env.kind, msg=env.msg_id, to=env.recipient)
    if request.get("wait"):
        reply_waiters[env.msg_id] = client
    else:
        in_flight[state["tag"]] = (client, {"ok": True, "msgId": env.msg_id})


buffers = {}


def on_client(fd, events):
    client, buf = buffers[fd]
    data = client.recv(65536)
    if not data:
        loop.remove_handler(fd)
        client.close()
        return
    buf.extend(data)
    while b"\n" in buf:
        line, _, rest = bytes(buf).partition(b"\n")
        buf[:] = rest
        handle(client, json.loads(line))


server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen(4)
server.setblocking(False)


def on_accept(fd, events):
    client, _ = server.accept()
    buffers[client.fileno()] = (client, bytearray())
    loop.add_handler(client.fileno(), on_client, IOLoop.READ)


def opened(role, channel):
    state[role] = channel
    if state["pub"] is not None and state["cons"] is not None:
        print("ready", flush=True)


def on_consume_channel(channel):
    queue = topology.inbox_name(my_gid)
    channel.queue_declare(queue, durable=True, arguments={"x-dead-letter-exchange": "bridge.dlx"},
                          callback=lambda _: channel.queue_bind(queue, "bridge.msg", my_gid, callback=lambda _: (
                              channel.basic_qos(prefetch_count=100, callback=lambda _: (
                                  channel.basic_consume(queue, on_message), opened("cons", channel))))))


def on_publish_channel(channel):
    channel.confirm_delivery(on_confirm, callback=lambda _: opened("pub", channel))


loop.add_handler(server.fileno(), on_accept, IOLoop.READ)
params = pika.URLParameters(uri)
pika.SelectConnection(params, custom_ioloop=loop,
                      on_open_callback=lambda c: c.channel(on_open_callback=on_consume_channel))
pika.SelectConnection(params, custom_ioloop=loop,
                      on_open_callback=lambda c: c.channel(on_open_callback=on_publish_channel))
loop.start()
"""

_WORKER = r"""
import json, socket, sys
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
lines = sock.makefile("rb")
while True:
    sock.sendall(b'{"op": "poll"}\n')
    messages = json.loads(lines.readline())["messages"]
    sock.sendall(json.dumps({"op": "confirm", "msg_ids": [m["msgId"] for m in messages]}).encode() + b"\n")
    lines.readline()
    for msg in messages:
        if msg["content"] == "stop":
            sys.exit(0)
        sock.sendall(json.dumps({"op": "reply", "msg_id": msg["msgId"], "content": "ok"}).encode() + b"\n")
        lines.readline()
"""


def floor_round_trips(
    bench: Bench, count: int, warmup: int, marks: Path | None = None, cpu: list[float] | None = None
) -> list[float]:
    """Floor round trips in ms; with ``marks`` each relay appends its publish and delivery
    times to ``marks/<relay>.marks`` (for ``bench/u1_hops.py``); ``cpu`` gets the CPU ms the
    two relays used per measured round trip."""
    root = Path(bench.root) / f"floor-{uuid.uuid4().hex[:6]}"
    root.mkdir()
    conn = bench.pika()  # the relays consume from inboxes bound on these (normally the gateway declares them)
    ch = conn.channel()
    ch.exchange_declare("bridge.msg", "topic", durable=True)
    ch.exchange_declare("bridge.dlx", "fanout", durable=True)
    conn.close()
    gids = {"a": str(uuid.uuid4()), "b": str(uuid.uuid4())}
    relays = {
        name: subprocess.Popen(
            [
                PYTHON,
                "-c",
                _RELAY,
                bench.node.uri,
                str(root / f"{name}.sock"),
                gid,
                str(root / f"{name}.db"),
                str(root / f"{name}.log"),
                *([str(marks / f"{name}.marks")] if marks else []),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        for name, gid in gids.items()
    }
    worker = None
    try:
        for relay in relays.values():
            assert relay.stdout is not None and relay.stdout.readline().strip() == "ready"
        worker = subprocess.Popen([PYTHON, "-c", _WORKER, str(root / "b.sock")], env=clean_env())
        main = socket.socket(socket.AF_UNIX)
        main.connect(str(root / "a.sock"))
        answers = main.makefile("rb")
        samples = []

        def call(request: dict[str, Any]) -> dict[str, Any]:
            main.sendall(json.dumps(request).encode() + b"\n")
            answer = json.loads(answers.readline())
            assert answer["ok"], answer
            return answer

        meter = CpuPerRound([relay.pid for relay in relays.values()], cpu)
        for i in range(warmup + count):
            if i == warmup:
                meter.start()
            began = time.perf_counter()
            answer = call({"op": "send", "target": gids["b"], "content": f"task {i}", "wait": True})
            if i >= warmup:
                samples.append((time.perf_counter() - began) * 1000)
            call({"op": "confirm", "msg_ids": [answer["reply"]["msgId"]]})  # as the gateway's main does
        meter.stop(count)
        call({"op": "send", "target": gids["b"], "content": "stop"})
        worker.wait(30)
        main.close()
        return samples
    finally:
        for proc in (worker, *relays.values()):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)


def main(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for bench/run_all.py: the floor against raw pika, and the gateway against the floor
    at p50 and p99 (goals: p50 <= 1.15x the floor and <= 3x raw, p99 <= 1.5x the floor's)."""
    rounds, count = (1, 100) if quick else (3, 300)
    samples: dict[str, list[float]] = {"raw": [], "floor": [], "gateway": []}
    cpu: dict[str, list[float]] = {"floor": [], "gateway": []}
    with Bench(quick) as bench:
        for _ in range(rounds):  # interleaved, so the shared machine's mood hits all three alike
            samples["raw"] += raw_round_trips(bench, count, 20)
            samples["floor"] += floor_round_trips(bench, count, 20, cpu=cpu["floor"])
            samples["gateway"] += bridge_round_trips(bench, count, 20, cpu=cpu["gateway"])
    n = len(samples["raw"])
    raw, floor, gateway = (median(samples[k]) for k in ("raw", "floor", "gateway"))
    floor99, gateway99 = pct(samples["floor"], 0.99), pct(samples["gateway"], 0.99)
    floor_cpu, gateway_cpu = median(cpu["floor"]), median(cpu["gateway"])
    every = f"{n} round trips each, {rounds} interleaved rounds"

    def met(ratio: float, goal: float) -> str:
        return f"goal <= {goal:g}x: {'met' if ratio <= goal else 'MISSED'}"

    rows = [
        (
            "U1 p50, floor: single-threaded relays doing the gateway's least work",
            floor,
            f"raw pika request/reply {raw:.2f} ms",
            floor / raw,
            every,
        ),
        (
            "U1 p50, the gateway against the floor",
            gateway,
            f"floor p50 {floor:.2f} ms",
            gateway / floor,
            f"{met(gateway / floor, 1.15)}; {gateway / raw:.2f}x raw ({met(gateway / raw, 3)}); {every}",
        ),
        (
            "U1 p99, the gateway against the floor",
            gateway99,
            f"floor p99 {floor99:.2f} ms",
            gateway99 / floor99,
            f"{met(gateway99 / floor99, 1.5)}; {every}",
        ),
        (
            "U1 CPU per round trip, both gateways against both floor relays",
            gateway_cpu,
            f"floor {floor_cpu:.2f} ms",
            gateway_cpu / floor_cpu,
            f"median of the rounds; {every}",
        ),
    ]
    out = [
        {
            "benchmark": "u1_floor",
            "metric": metric,
            "value": round(value, 2),
            "unit": "ms",
            "baseline": baseline,
            "ratio": round(ratio, 2),
            "note": note,
        }
        for metric, value, baseline, ratio, note in rows
    ]
    for row in out:
        print(f"{row['metric']:<72} {row['value']:>7} ms  {row['ratio']}x ({row['baseline']}; {row['note']})")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one short round (a smoke run)")
    main(parser.parse_args().quick)
