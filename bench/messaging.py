"""Messaging through the gateway against raw AMQP clients on the same private broker.

Each figure is a ratio against a baseline measured in the same run (issue #3, "How it is
checked" (a), (b), (b2), (c)):

(a) ``delivery``: gateway delivery throughput into the no-op backend (``bench/noop_plugin``,
    dedup persistence on) vs a raw pika manual-ack consumer with the same prefetch
    (``messaging.prefetch``). Both drain a queue pre-filled with N identical persistent
    envelopes (same queue arguments as an inbox). Rate = (N-1) / (last - first delivery):
    for the gateway the ``received`` times of its dedup records, for pika the consumer's own
    clock at its first callback and its last ack; process start-up is outside both. Goal >= 0.8x.
(b) ``bridge send`` one-shot through the running gateway (and direct, no gateway) vs
    ``amqp-publish -p`` and vs a minimal pika script (connect, confirm_delivery, publish,
    close); all commands interleaved, 3 warm-ups + RUNS runs each, medians. Goal: through
    the gateway <= 0.45x the pika script and <= 10x amqp-publish; ``-X importtime`` shows
    whether the gateway path imports pika (it must not).
(b2) ``bridge send TARGET - --lines`` with 1,000 lines through the gateway vs a shell loop
    of 1,000 ``amqp-publish -p``. Goal >= 5x faster in total.
(c) U1 round trip: the bench (as the main on host A) calls ``send`` with ``wait`` on gateway
    A's socket; a worker process on host B long-polls gateway B's socket (``poll`` with
    ``wait``, the hold backend = the MCP pull path) and answers with ``reply`` on B's socket;
    the reply travels back through both gateways and the broker and resolves the main's
    wait. Baseline: a raw pika request/reply with the same guarantees (persistent messages,
    publisher confirms, manual acks; two processes, reply queue, correlation id). p50/p99
    over M sequential round trips each, in alternating rounds of the two. Goal <= 1.5x.

Everything runs against a private RabbitMQ node (``LocalNode`` in a /tmp dir, free ports)
with isolated XDG dirs per simulated host; all of it is stopped and removed at the end.
Run: ``.venv/bin/python bench/messaging.py [--quick] [--profile DIR]``. Asserts nothing.
``--profile DIR`` also runs (a) once more with the gateway under cProfile and writes
``DIR/gateway-delivery.prof`` (plus a top-25 text summary).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV_BIN = Path(sys.executable).parent
PYTHON = str(VENV_BIN / "python")
BRIDGE = str(VENV_BIN / "bridge")
NOOP_DIR = BENCH / "noop_plugin"
ONESHOT_QUEUE = "bench.oneshot"

if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from bridgecli.localbroker import LocalNode  # noqa: E402  (no pika at import)

# --- helpers ----------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _clean_env() -> dict[str, str]:
    """os.environ minus PYTHONDONTWRITEBYTECODE: with it set (as in some dev shells) an
    editable checkout has no ``__pycache__`` and every ``bridge`` run recompiles its modules,
    which no installed copy ever does; the warm-up runs write the bytecode once."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _noop_site(root: Path) -> str:
    """A PYTHONPATH entry holding a ``.dist-info`` with the noop plugin's entry point, so the
    gateway finds it without installing anything into the shared venv."""
    site = root / "noop-site"
    info = site / "bridgecli_bench_noop-0.1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bridgecli-bench-noop\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[bridgecli]\nbench_noop = bridgecli_bench_noop\n")
    return f"{site}{os.pathsep}{NOOP_DIR}"


class Host:
    """One simulated host: own XDG dirs, host id and broker URI; its gateway as a subprocess."""

    def __init__(self, name: str, root: Path, broker_uri: str, extra_env: dict[str, str] | None = None) -> None:
        self.name = name
        self.root = root
        self.env = {k: v for k, v in _clean_env().items() if not k.startswith(("BRIDGE_", "XDG_", "OCB_"))}
        for part in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
            path = root / part.lower()
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.env[f"XDG_{part}_{'DIR' if part == 'RUNTIME' else 'HOME'}"] = str(path)
        self.env.update({"BRIDGE_HOST_ID": name, "BRIDGE_BROKER_URI": broker_uri, **(extra_env or {})})
        self.gateway: subprocess.Popen | None = None
        self.log_path = root / "gateway.log"

    @property
    def socket(self) -> Path:
        return Path(self.env["XDG_RUNTIME_DIR"]) / "bridge" / "gateway.sock"

    @property
    def db(self) -> Path:
        return Path(self.env["XDG_STATE_HOME"]) / "bridge" / "gateway.db"

    def bridge(self, *args: str, input: str | None = None, env: dict[str, str] | None = None,
               check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([BRIDGE, *args], env={**self.env, **(env or {})}, capture_output=True,
                              text=True, input=input, timeout=300,
                              stdin=None if input is not None else subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise RuntimeError(f"bridge {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def register(self, label: str, deliver: str, role: str = "agent") -> str:
        """``bridge register`` as this host (direct path, before its gateway runs); the gid."""
        return self.bridge("register", "--label", label, "--role", role, "--deliver", deliver).stdout.strip()

    def start_gateway(self, argv: list[str] | None = None, timeout: float = 60) -> None:
        """Start ``bridge gateway`` (or ``argv``) and wait until its socket says connected."""
        with open(self.log_path, "ab") as log:
            self.gateway = subprocess.Popen(argv or [BRIDGE, "gateway"], env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
        from bridgecli.gateway.client import ping

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.gateway.poll() is not None:
                raise RuntimeError(f"gateway {self.name} exited {self.gateway.returncode}: {self.log()}")
            status = ping(self.socket)
            if status and status["broker"]["connected"]:
                return
            time.sleep(0.1)
        raise RuntimeError(f"gateway {self.name} not connected after {timeout}s: {self.log()}")

    def stop_gateway(self) -> None:
        if self.gateway is not None and self.gateway.poll() is None:
            self.gateway.send_signal(signal.SIGTERM)
            try:
                self.gateway.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.gateway.pid, signal.SIGKILL)
                self.gateway.wait(10)
        self.gateway = None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""


class Bench:
    """Owns the private broker, the simulated hosts and the temp dir."""

    def __init__(self, quick: bool = False) -> None:
        self.quick = quick
        self.root = Path(tempfile.mkdtemp(prefix="bmsg", dir="/tmp"))
        self.node = LocalNode(self.root / "node")
        self.hosts: list[Host] = []

    def __enter__(self) -> "Bench":
        self.node.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for host in self.hosts:
            host.stop_gateway()
        self.node.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def host(self, name: str, extra_env: dict[str, str] | None = None) -> Host:
        host_id = f"{name}-{uuid.uuid4().hex[:6]}"
        host = Host(host_id, self.root / host_id, self.node.uri, extra_env)
        self.hosts.append(host)
        return host

    def pika(self):
        """A fresh pika BlockingConnection to the private node (pika is imported here only)."""
        import pika

        return pika.BlockingConnection(pika.URLParameters(self.node.uri))


# --- (a) delivery throughput ------------------------------------------------------------

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
    confirms), then wait until the queue holds them all (passive declare, as in §7)."""
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
                        "SELECT COUNT(*), MIN(received), MAX(received) FROM messages").fetchall()[0]
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


def _gateway_round(bench: Bench, bodies_for: Callable[[str], list], n: int,
                   profile_to: Path | None = None) -> float:
    """One gateway drain on a fresh host; returns msg/s."""
    from bridgecli.amqp import topology

    host = bench.host("tput", {"PYTHONPATH": _noop_site(bench.root)})
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
    proc = subprocess.run([PYTHON, "-c", _RAW_CONSUMER, bench.node.uri, queue_obj.name, str(n), str(prefetch)],
                          env=_clean_env(), capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"raw consumer failed: {proc.stderr.strip()[-500:]}")
    state = json.loads(proc.stdout)
    conn = bench.pika()
    try:
        conn.channel().queue_delete(queue_obj.name)
    finally:
        conn.close()
    return (n - 1) / (state["last"] - state["first"])


def _bodies(n: int) -> Callable[[str], list[tuple[bytes, dict]]]:
    from bridgecli.envelope import Envelope

    sender = str(uuid.uuid4())

    def make(recipient: str) -> list[tuple[bytes, dict]]:
        out = []
        for i in range(n):
            env = Envelope(kind="SEND", sender=sender, recipient=recipient, content=f"bench message {i:06d}",
                           sender_label="bench", sender_host="bench")
            out.append((env.to_bytes(), env.amqp_properties()))
        return out

    return make


def bench_delivery(bench: Bench, rounds: int, n: int) -> dict[str, Any]:
    """(a): medians over ``rounds`` alternating gateway / raw rounds."""
    probe = bench.host("cfg")
    prefetch = int(probe.bridge("config", "get", "messaging.prefetch").stdout.strip())
    bodies_for = _bodies(n)
    gateway, raw = [], []
    for i in range(rounds):
        if i % 2:
            raw.append(_raw_round(bench, bodies_for, n, prefetch))
            gateway.append(_gateway_round(bench, bodies_for, n))
        else:
            gateway.append(_gateway_round(bench, bodies_for, n))
            raw.append(_raw_round(bench, bodies_for, n, prefetch))
    return {"gateway": gateway, "raw": raw, "prefetch": prefetch, "n": n}


# --- (b) one-shot send and (b2) bulk ----------------------------------------------------

_PIKA_PUBLISH = ("import pika, sys\n"
                 "c = pika.BlockingConnection(pika.URLParameters(sys.argv[1]))\n"
                 "ch = c.channel()\nch.confirm_delivery()\n"
                 "ch.basic_publish('', sys.argv[2], b'hello', pika.BasicProperties(delivery_mode=2))\n"
                 "c.close()\n")


def _timed(cmd: list[str], env: dict[str, str], stdin: bytes | None = None) -> float:
    began = time.perf_counter()
    proc = subprocess.run(cmd, env=env, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          stdin=None if stdin is not None else subprocess.DEVNULL)
    elapsed = (time.perf_counter() - began) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} … exited {proc.returncode}: {proc.stderr.decode()[-400:]}")
    return elapsed


def _imports_pika(cmd: list[str], env: dict[str, str]) -> tuple[bool, float]:
    """Run ``cmd`` with ``-X importtime`` (PYTHONPROFILEIMPORTTIME); (pika imported?, total
    cumulative import ms of top-level modules)."""
    proc = subprocess.run(cmd, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    pika_seen, total_us = False, 0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:"):].rstrip("\n").split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2][1:]  # one space after the bar, then two per nesting level
        if name.strip().split(".")[0] == "pika":
            pika_seen = True
        if not name.startswith(" "):  # top level: its cumulative time covers its children
            total_us += int(parts[1])
    return pika_seen, total_us / 1000


def bench_oneshot(bench: Bench, runs: int, bulk_rounds: int, bulk_n: int) -> dict[str, Any]:
    """(b) and (b2) on one host with a running gateway; the target holds what it gets."""
    host = bench.host("send")
    main_gid = host.register("main", "hold", role="main")
    sink_gid = host.register("sink", "hold")
    host.start_gateway()
    conn = bench.pika()
    try:
        conn.channel().queue_declare(ONESHOT_QUEUE, durable=True)
    finally:
        conn.close()
    uri = bench.node.uri.rstrip("/")  # amqp-publish reads a trailing "/" as the empty vhost
    direct_env = {**host.env, "BRIDGE_GATEWAY_SOCKET": str(bench.root / "no-gateway.sock")}
    cases = {
        "gateway": ([BRIDGE, "send", sink_gid, "hello", "--from", main_gid], host.env),
        "direct": ([BRIDGE, "send", sink_gid, "hello", "--from", main_gid], direct_env),
        "amqp-publish": (["amqp-publish", "-u", uri, "-r", ONESHOT_QUEUE, "-p", "-b", "hello"], host.env),
        "pika": ([PYTHON, "-c", _PIKA_PUBLISH, uri, ONESHOT_QUEUE], host.env),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(3 + runs):  # interleaved, so load spikes hit every command alike
        for name, (cmd, env) in cases.items():
            ms = _timed(cmd, env)
            if i >= 3:
                samples[name].append(ms)
    gw_pika, gw_import_ms = _imports_pika(cases["gateway"][0], host.env)
    direct_pika, direct_import_ms = _imports_pika(cases["direct"][0], direct_env)

    lines = "".join(f"bulk line {i:04d}\n" for i in range(bulk_n)).encode()
    loop = (f'for i in $(seq {bulk_n}); do amqp-publish -u "$1" -r {ONESHOT_QUEUE} -p -b "bulk line $i" '
            f'|| exit 1; done')
    bulk_bridge, bulk_amqp = [], []
    for _ in range(bulk_rounds):
        bulk_bridge.append(_timed([BRIDGE, "send", sink_gid, "-", "--lines", "--from", main_gid],
                                  host.env, stdin=lines))
        bulk_amqp.append(_timed(["bash", "-c", loop, "loop", uri], host.env))
    host.stop_gateway()
    conn = bench.pika()
    try:
        conn.channel().queue_delete(ONESHOT_QUEUE)
    finally:
        conn.close()
    return {"samples": samples, "gateway_imports_pika": gw_pika, "gateway_import_ms": gw_import_ms,
            "direct_imports_pika": direct_pika, "direct_import_ms": direct_import_ms,
            "bulk_bridge": bulk_bridge, "bulk_amqp": bulk_amqp, "bulk_n": bulk_n, "runs": runs}


# --- (c) U1 round trip -----------------------------------------------------------------

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


def _bridge_round_trips(bench: Bench, count: int, warmup: int) -> list[float]:
    from bridgecli.errors import NotFound
    from bridgecli.gateway.client import GatewayClient

    a, b = bench.host("a"), bench.host("b")
    main_gid = a.register("main", "hold", role="main")
    worker_gid = b.register("worker", "hold")
    a.start_gateway()
    b.start_gateway()
    worker = subprocess.Popen([PYTHON, "-c", _BRIDGE_WORKER, str(b.socket), worker_gid], env=b.env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        samples = []
        with GatewayClient.require(a.socket) as client:
            deadline = time.monotonic() + 30
            while True:  # until gateway A's roster announces the worker (no --force)
                try:
                    client.call("send", command="send", target=worker_gid, content="warm-up",
                                sender=main_gid, wait=30, timeout=60)
                    break
                except NotFound:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            for i in range(warmup + count):
                began = time.perf_counter()
                # as `bridge send --wait` does: the reply is taken until the caller confirms it
                answer = client.call("send", command="send", target=worker_gid, content=f"task {i}",
                                     sender=main_gid, wait=30, timeout=60, confirm=True)
                if i >= warmup:
                    samples.append((time.perf_counter() - began) * 1000)
                client.confirm_pending(answer)  # after the reply is "printed", as the CLI does
            client.call("send", command="send", target=worker_gid, content="stop", sender=main_gid)
        worker.wait(30)
    finally:
        if worker.poll() is None:
            worker.kill()
        a.stop_gateway()
        b.stop_gateway()
    return samples


def _raw_round_trips(bench: Bench, count: int, warmup: int) -> list[float]:
    import pika

    queue = f"bench.rpc.{uuid.uuid4().hex[:8]}"
    worker = subprocess.Popen([PYTHON, "-c", _RAW_WORKER, bench.node.uri, queue], env=_clean_env(),
                              stdout=subprocess.PIPE, text=True)
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
            ch.basic_publish("", queue, f"task {i}".encode(), pika.BasicProperties(
                reply_to=reply_queue, correlation_id=state["want"], delivery_mode=2))
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
        cases = [(bridge, _bridge_round_trips), (raw, _raw_round_trips)]
        for samples, measure in cases[::-1] if i % 2 else cases:
            samples += measure(bench, per_round, warmup)
    return {"bridge": bridge, "raw": raw, "count": per_round * rounds, "rounds": rounds}


# --- table -------------------------------------------------------------------------------


def _row(metric: str, value: float, unit: str, baseline: str, ratio: float | None, goal: str, met: bool | None,
         note: str = "") -> dict[str, Any]:
    verdict = "" if met is None else ("met" if met else "MISSED")
    text = "; ".join(part for part in (f"goal {goal}: {verdict}" if goal else "", note) if part)
    return {"benchmark": "messaging", "metric": metric, "value": round(value, 1), "unit": unit,
            "baseline": baseline, "ratio": None if ratio is None else round(ratio, 2), "note": text,
            "goal": goal, "met": met}


def rows_from(delivery: dict, oneshot: dict, rtt: dict) -> list[dict[str, Any]]:
    """run_all rows (plus ``goal``/``met`` for the printed table) from the raw samples."""
    rows = []
    gw, raw = _median(delivery["gateway"]), _median(delivery["raw"])
    rows.append(_row(f"(a) delivery into noop backend, prefetch {delivery['prefetch']}, dedup on", gw, "msg/s",
                     f"raw pika manual-ack consumer {raw:.0f} msg/s", gw / raw, ">= 0.8x", gw / raw >= 0.8,
                     f"N={delivery['n']}, median of {len(delivery['gateway'])} rounds"))
    s = {name: _median(v) for name, v in oneshot["samples"].items()}
    pika_import = "imports pika" if oneshot["gateway_imports_pika"] else "no pika import"
    rows.append(_row("(b) bridge send via gateway vs pika script", s["gateway"], "ms",
                     f"pika connect+confirm+publish script {s['pika']:.1f} ms", s["gateway"] / s["pika"],
                     "<= 0.45x", s["gateway"] / s["pika"] <= 0.45 and not oneshot["gateway_imports_pika"],
                     f"{pika_import} (-X importtime); median of {oneshot['runs']}"))
    rows.append(_row("(b) bridge send via gateway vs amqp-publish", s["gateway"], "ms",
                     f"amqp-publish -p {s['amqp-publish']:.1f} ms", s["gateway"] / s["amqp-publish"],
                     "<= 10x", s["gateway"] / s["amqp-publish"] <= 10))
    rows.append(_row("(b) bridge send direct (no gateway) vs pika script", s["direct"], "ms",
                     f"pika connect+confirm+publish script {s['pika']:.1f} ms", s["direct"] / s["pika"], "", None,
                     f"{'imports pika' if oneshot['direct_imports_pika'] else 'no pika import'}; "
                     f"{s['direct'] / s['amqp-publish']:.1f}x amqp-publish"))
    bb, ba = _median(oneshot["bulk_bridge"]), _median(oneshot["bulk_amqp"])
    rows.append(_row(f"(b2) bridge send - --lines, {oneshot['bulk_n']} lines via gateway", bb, "ms",
                     f"{oneshot['bulk_n']} x amqp-publish -p {ba:.0f} ms", bb / ba, ">= 5x faster (<= 0.2x)",
                     ba / bb >= 5, f"{ba / bb:.1f}x faster; median of {len(oneshot['bulk_bridge'])}"))
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        bv, rv = _pct(rtt["bridge"], q), _pct(rtt["raw"], q)
        rows.append(_row(f"(c) U1 round trip {label}, two gateways", bv, "ms",
                         f"raw pika request/reply (confirms, persistent) {rv:.2f} ms", bv / rv, "<= 1.5x",
                         bv / rv <= 1.5,
                         f"{rtt['count']} sequential round trips each, {rtt['rounds']} interleaved rounds"))
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    """metric, bridge, baseline, ratio, goal, met? — one line per row."""
    print(f"{'metric':<58} {'bridge':>10} {'baseline':>44} {'ratio':>7} {'goal':>22} met?")
    for r in rows:
        met = "" if r["met"] is None else ("yes" if r["met"] else "NO")
        print(f"{r['metric']:<58} {r['value']:>7} {r['unit']:<3}{r['baseline']:>44} "
              f"{r['ratio'] if r['ratio'] is not None else '':>6}x {r['goal']:>22} {met}")


def main(quick: bool = False, profile: str | None = None) -> list[dict[str, Any]]:
    """Rows for bench/run_all.py (see the module docstring); also prints the table."""
    load_before = os.getloadavg()[0]
    with Bench(quick) as bench:
        delivery = bench_delivery(bench, rounds=1 if quick else 3, n=2000 if quick else 10000)
        oneshot = bench_oneshot(bench, runs=10 if quick else 30, bulk_rounds=1 if quick else 3,
                                bulk_n=1000)
        rtt = bench_round_trip(bench, count=100 if quick else 500, rounds=2 if quick else 5)
        if profile:
            out = Path(profile)
            out.mkdir(parents=True, exist_ok=True)
            rate = _gateway_round(bench, _bodies(10000), 10000, profile_to=out / "gateway-delivery.prof")
            print(f"profiled gateway round: {rate:.0f} msg/s (under cProfile)", file=sys.stderr)
            import io
            import pstats

            text = io.StringIO()
            pstats.Stats(str(out / "gateway-delivery.prof"), stream=text).sort_stats("cumtime").print_stats(25)
            (out / "gateway-delivery.txt").write_text(text.getvalue())
    rows = rows_from(delivery, oneshot, rtt)
    shared = f"shared machine: load avg {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    rows[0]["note"] += f"; {shared}"
    print_table(rows)
    print(shared)
    for row in rows:
        row.pop("goal"), row.pop("met")
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and messages (a smoke run)")
    parser.add_argument("--profile", metavar="DIR", help="also profile the gateway's delivery loop (cProfile)")
    args = parser.parse_args()
    main(args.quick, args.profile)
