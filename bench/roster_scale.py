"""The presence roster at scale: 50 gateways x 40 entities against a real RabbitMQ node.

The fleet (issue #4, "Benchmark in bench/"):

* one **real** ``bridge gateway`` process (own XDG dirs, ``BRIDGE_HOST_ID``,
  ``BRIDGE_BROKER_URI``, ``BRIDGE_ROSTER_INTERVAL``) serving 40 ``hold`` entities made with
  ``bridge register``;
* G - 2 **simulated** gateways in a few worker processes (this file run with ``--worker``):
  each has its own pika connection (``SelectConnection``; a worker's gateways share one
  I/O loop), its own ``roster.<host>`` queue declared from :mod:`bridgecli.amqp.topology`
  (exclusive, auto-delete, bound ``roster.#``), connects at a random moment within the
  first interval (a fleet in steady state did not boot in the same second; a synchronized
  start is a burst that can tip the broker over, see docs/roster.md), publishes the frames
  of :func:`bridgecli.roster.heartbeat_frame` for its 40 entities and itself every interval
  (at a random phase, with the properties the gateway uses) and applies every frame it
  receives to its own :class:`bridgecli.roster.RosterView`;
* one **new** gateway, the G-th: a simulated gateway in a fresh process that joins the
  running fleet, announces its own entities at once (as the real one does on connect) and
  reports when its view holds all G x E entities. It then leaves with ``gone`` frames and
  the next probe joins (repeated, medians).

Measured, with the fleet in steady state (G gateways):

1. **convergence** of the new gateway: from its ``basic_consume`` being confirmed to its
   view holding all G x E entities, in intervals (goal <= 2);
2. **heartbeats/s** published (all gateways' counters) and delivered broker-wide (every
   gateway's frames received), against the formula G(E+1)/interval and G^2(E+1)/interval;
3. the **real gateway's CPU** (utime + stime of its process from ``/proc/<pid>/stat``) over
   fixed windows, as % of one core (goal < 5 %), plus the same gateway alone before the
   fleet starts; also the broker's and the simulated gateways' CPU and the whole machine's
   busy share (the machine is 2 shared cores: read the figures with that in mind).

Run: ``.venv/bin/python bench/roster_scale.py [--interval S] [--profile DIR]``; prints a
table; ``main()`` returns rows for bench/run_all.py. Asserts nothing. ``--profile DIR`` also
runs the real gateway under cProfile for one window and writes ``DIR/gateway-roster.prof``
and a text summary; ``--gateways 10,20,30`` sweeps fleet sizes; ``--ab-cache-at G`` also
measures the real gateway with its per-heartbeat ``roster.json`` write stubbed out.
Everything (broker node, processes, temp dirs) is removed at the end. Figures and their
reading: docs/roster.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV_BIN = Path(sys.executable).parent
PYTHON = str(VENV_BIN / "python")
BRIDGE = str(VENV_BIN / "bridge")
NAME = Path(__file__).stem

GATEWAYS = 50
ENTITIES = 40
PROBE_INTERVALS = 6  # a new gateway that has not converged by then is reported as timed out
WORKERS = 4  # processes holding the simulated gateways (2 cores: a few, not one per gateway)
CLK_TCK = os.sysconf("SC_CLK_TCK")

if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))
if str(BENCH) not in sys.path:  # run_all loads the scripts by path
    sys.path.insert(0, str(BENCH))

from _common import Column, key, median, print_table, ratio_cell  # noqa: E402


# --- measuring helpers ------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def runq_wait_seconds(pid: int) -> float:
    """Time the threads of ``pid`` spent runnable but waiting for a CPU (schedstat), in s."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all cores from /proc/stat."""
    with open("/proc/stat") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


# --- simulated gateways (worker processes) ----------------------------------------------

class SimGateway:
    """One simulated gateway on a shared pika I/O loop: the presence half of a real one."""

    def __init__(self, host: str, entities: int, interval: float, ioloop: Any, uri: str,
                 emit: Any, target: int = 0, random_phase: bool = True) -> None:
        from bridgecli import roster
        from bridgecli.interfaces import Entity

        self.host = host
        self.interval = interval
        self.ioloop = ioloop
        self.uri = uri
        self.emit = emit
        self.target = target
        self.random_phase = random_phase
        created = time.time()
        self.entities = [Entity(gid=str(uuid.uuid4()), label=f"{host}-e{i}", role="agent", deliver="hold",
                                host=host, created=created) for i in range(entities)]
        self.view = roster.RosterView()
        self.sent = 0
        self.received = 0
        self.connection: Any = None
        self.channel: Any = None
        self.started_at = time.time()
        self.consuming_at: float | None = None
        self.converged_at: float | None = None
        self.closing = False

    # wiring (the callback chain of an async pika connection)
    def connect(self) -> None:
        import pika

        self.connection = pika.SelectConnection(
            pika.URLParameters(self.uri), on_open_callback=self._on_open,
            on_open_error_callback=lambda _c, exc: self.emit({"event": "error", "host": self.host,
                                                               "error": repr(exc)}),
            custom_ioloop=self.ioloop)

    def _on_open(self, connection: Any) -> None:
        connection.channel(on_open_callback=self._on_channel)

    def _on_channel(self, channel: Any) -> None:
        from bridgecli.amqp import topology

        self.channel = channel
        queue = topology.roster_queue(self.host)
        self.binding = queue.bindings[0]
        channel.queue_declare(queue.name, durable=queue.durable, exclusive=queue.exclusive,
                              auto_delete=queue.auto_delete, callback=self._on_declared)

    def _on_declared(self, _frame: Any) -> None:
        self.channel.queue_bind(f"roster.{self.host}", self.binding.exchange,
                                routing_key=self.binding.routing_key, callback=self._on_bound)

    def _on_bound(self, _frame: Any) -> None:
        self.channel.basic_consume(f"roster.{self.host}", self._on_frame, auto_ack=True,
                                   callback=self._on_consuming)

    def _on_consuming(self, _frame: Any) -> None:
        self.consuming_at = time.time()
        self.heartbeat_all()  # a gateway announces itself on connect
        first = random.uniform(0, self.interval) if self.random_phase else self.interval
        self._schedule(time.monotonic() + first)
        if self.target:
            self._check_converged()

    # traffic
    def _on_frame(self, _channel: Any, _method: Any, _props: Any, body: bytes) -> None:
        self.received += 1
        self.view.apply(body)

    def _publish(self, gid: str, body: bytes) -> None:
        import pika

        from bridgecli import roster
        from bridgecli.amqp import topology

        props = pika.BasicProperties(content_type="application/json", delivery_mode=1,
                                     expiration=str(int(self.interval * 1000 * 3)))
        self.channel.basic_publish(topology.ROSTER, roster.routing_key(self.host, gid), body, props)
        self.sent += 1

    def heartbeat_all(self) -> None:
        from bridgecli import __version__, roster

        for entity in self.entities:
            self._publish(entity.gid, roster.heartbeat_frame(host=self.host, version=__version__,
                                                             interval=self.interval, entity=entity,
                                                             status="idle"))
        self._publish(roster.GATEWAY_KEY, roster.heartbeat_frame(
            host=self.host, version=__version__, interval=self.interval, entities=len(self.entities)))

    def _schedule(self, due: float) -> None:
        def tick() -> None:
            if self.closing or self.channel is None or not self.channel.is_open:
                return
            self.heartbeat_all()
            next_due = due + self.interval
            while next_due < time.monotonic():  # an overloaded loop skips beats, as a gateway would
                next_due += self.interval
            self._schedule(next_due)

        self.ioloop.call_later(max(0.0, due - time.monotonic()), tick)

    def _check_converged(self) -> None:
        """Poll the view every 20 ms (0.4 % of a 5 s interval) until it holds ``target``."""
        if self.converged_at is not None or self.closing:
            return
        if len(self.view.entries()) >= self.target:
            self.converged_at = time.time()
            self.emit({"event": "converged", "host": self.host, "started_at": self.started_at,
                       "consuming_at": self.consuming_at, "converged_at": self.converged_at,
                       "gateways": len(self.view.gateways()), "received": self.received})
            return
        self.ioloop.call_later(0.02, self._check_converged)

    def close(self) -> None:
        """Leave like a cleanly stopped gateway: ``gone`` for each entity and itself."""
        from bridgecli import roster

        self.closing = True
        if self.channel is not None and self.channel.is_open:
            for entity in self.entities:
                self._publish(entity.gid, roster.gone_frame(host=self.host, gid=entity.gid,
                                                            reason="gateway stopped"))
            self._publish(roster.GATEWAY_KEY, roster.gone_frame(host=self.host, gid=roster.GATEWAY_KEY,
                                                                reason="gateway stopped"))
        if self.connection is not None and self.connection.is_open:
            self.connection.close()


def worker(args: argparse.Namespace) -> int:
    """``--worker``: run ``args.hosts`` simulated gateways on one I/O loop; report JSON lines
    on stdout every 0.5 s (cumulative counters) and events (convergence); "stop" or EOF on
    stdin makes them leave cleanly."""
    from pika.adapters.select_connection import IOLoop

    ioloop = IOLoop()
    out_lock = threading.Lock()

    def emit(obj: dict[str, Any]) -> None:
        with out_lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    gateways = [SimGateway(host, args.entities, args.interval, ioloop, args.uri, emit, target=args.target,
                           random_phase=not args.target)
                for host in args.hosts.split(",")]
    for gw in gateways:
        # a fleet in steady state did not boot in the same second: spread the connects (and
        # the announce burst each makes) over one interval; a joining gateway starts at once
        ioloop.call_later(0 if args.target else random.uniform(0, args.interval), gw.connect)

    def report() -> None:
        emit({"t": time.time(), "sent": sum(g.sent for g in gateways),
              "received": sum(g.received for g in gateways),
              "consuming": sum(g.consuming_at is not None for g in gateways),
              "view": len(gateways[0].view.entries())})
        ioloop.call_later(0.5, report)

    def stop() -> None:
        for gw in gateways:
            gw.close()
        ioloop.call_later(2.0, ioloop.stop)  # let the closes and gone frames go out

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        ioloop.add_callback_threadsafe(stop)

    threading.Thread(target=read_stdin, daemon=True).start()
    ioloop.call_later(0.5, report)
    ioloop.start()
    return 0


class Worker:
    """The parent's handle on one worker process: its latest report and its events."""

    def __init__(self, uri: str, hosts: list[str], entities: int, interval: float, log: Path,
                 target: int = 0) -> None:
        argv = [PYTHON, str(Path(__file__).resolve()), "--worker", "--uri", uri, "--hosts", ",".join(hosts),
                "--entities", str(entities), "--interval", str(interval), "--target", str(target)]
        self.hosts = hosts
        self.log = log
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(log, "ab"), text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        self.last: dict[str, Any] = {}
        self.events: list[dict[str, Any]] = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            with self.changed:
                if "event" in obj:
                    self.events.append(obj)
                else:
                    self.last = obj
                self.changed.notify_all()

    def wait_event(self, kind: str, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for event in self.events:
                    if event["event"] == kind:
                        return event
                    if event["event"] == "error":
                        raise RuntimeError(f"simulated gateway failed: {event}")
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return None
                self.changed.wait(left)

    def wait_consuming(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.last.get("consuming") == len(self.hosts):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        raise RuntimeError(f"worker not consuming after {timeout}s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
                self.proc.wait(15)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(5)


# --- the real gateway -------------------------------------------------------------------

class RealGateway:
    """``bridge gateway`` with its own XDG dirs, host id, broker URI and roster interval."""

    def __init__(self, root: Path, uri: str, interval: float) -> None:
        self.host = f"real-{uuid.uuid4().hex[:6]}"
        self.root = root / self.host
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("BRIDGE_", "XDG_", "OCB_"))}
        for part in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
            path = self.root / part.lower()
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.env[f"XDG_{part}_{'DIR' if part == 'RUNTIME' else 'HOME'}"] = str(path)
        self.env.update({"BRIDGE_HOST_ID": self.host, "BRIDGE_BROKER_URI": uri,
                         "BRIDGE_ROSTER_INTERVAL": f"{interval:g}"})
        self.proc: subprocess.Popen | None = None
        self.log_path = self.root / "gateway.log"

    @property
    def socket(self) -> Path:
        return Path(self.env["XDG_RUNTIME_DIR"]) / "bridge" / "gateway.sock"

    def register(self, count: int) -> None:
        for i in range(count):
            proc = subprocess.run([BRIDGE, "register", "--label", f"e{i}", "--deliver", "hold"], env=self.env,
                                  capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                raise RuntimeError(f"bridge register exited {proc.returncode}: {proc.stderr.strip()}")

    def start(self, profile_to: Path | None = None, timeout: float = 60, no_cache: bool = False) -> None:
        """Start it; ``no_cache`` stubs out the per-heartbeat ``roster.json`` write (an A/B
        that isolates its cost; bench only)."""
        argv = [BRIDGE, "gateway"]
        if no_cache:
            argv = [PYTHON, "-c", "import sys; from bridgecli import cache; cache.save_roster = lambda view: True; "
                    "from bridgecli.cli import main; sys.argv = ['bridge', 'gateway']; main()"]
        if profile_to is not None:
            argv = [PYTHON, "-m", "cProfile", "-o", str(profile_to), "-m", "bridgecli", "gateway"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited {self.proc.returncode}: {self.log()}")
            status = self.status()
            if status and status["broker"]["connected"]:
                return
            time.sleep(0.1)
        raise RuntimeError(f"gateway not connected after {timeout}s: {self.log()}")

    def status(self) -> dict[str, Any] | None:
        from bridgecli.gateway.client import ping

        return ping(self.socket)

    def roster_counters(self) -> dict[str, int]:
        """entities/gateways in its view and heartbeats sent/received, from ``status``."""
        status = self.status() or {}
        text = str(status.get("extra", {}).get("roster", ""))
        match = re.search(r"(\d+) entities on (\d+) gateways; heartbeats sent (\d+), received (\d+)", text)
        if not match:
            return {}
        return dict(zip(("entities", "gateways", "sent", "received"), map(int, match.groups())))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""


# --- the benchmark ----------------------------------------------------------------------

class Fleet:
    """Owns the private broker node, the real gateway, the workers and the temp dir."""

    def __init__(self, interval: float, gateways: int, entities: int) -> None:
        from bridgecli.localbroker import LocalNode

        self.interval = interval
        self.gateways = gateways
        self.entities = entities
        self.root = Path(tempfile.mkdtemp(prefix="broster", dir="/tmp"))
        self.node = LocalNode(self.root / "node")
        self.real: RealGateway | None = None
        self.workers: list[Worker] = []
        self.probe: Worker | None = None

    def __enter__(self) -> "Fleet":
        self.node.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self.workers + ([self.probe] if self.probe else []):
            w.stop()
        if self.real is not None:
            self.real.stop()
        self.node.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def start_real(self) -> None:
        self.real = RealGateway(self.root, self.node.uri, self.interval)
        self.real.register(self.entities)
        self.real.start()

    def start_simulated(self, count: int) -> None:
        hosts = [f"sim{i:02d}-{uuid.uuid4().hex[:4]}" for i in range(count)]
        for i in range(WORKERS):
            chunk = hosts[i::WORKERS]
            if chunk:
                self.workers.append(Worker(self.node.uri, chunk, self.entities, self.interval,
                                           self.root / f"worker{i}.log"))
        for w in self.workers:
            w.wait_consuming()

    def run_probe(self) -> dict[str, Any]:
        """A new gateway joins; returns its convergence event, or a ``timeout`` event with the
        size its view reached after PROBE_INTERVALS intervals."""
        if self.probe is not None:
            self.probe.stop()
            time.sleep(0.5)  # its gone frames reach the others
        target = self.gateways * self.entities
        self.probe = Worker(self.node.uri, [f"new-{uuid.uuid4().hex[:6]}"], self.entities, self.interval,
                            self.root / "probe.log", target=target)
        event = self.probe.wait_event("converged", PROBE_INTERVALS * self.interval + 10)
        return event or {"event": "timeout", "view": self.probe.last.get("view", 0)}

    def stop_simulated(self) -> None:
        for w in self.workers + ([self.probe] if self.probe else []):
            w.stop()
        self.workers, self.probe = [], None

    def window(self, seconds: float) -> dict[str, float]:
        """CPU and message rates over ``seconds`` of steady state."""
        assert self.real is not None and self.real.proc is not None
        members = self.workers + ([self.probe] if self.probe else [])
        real_pid, vm_pid = self.real.proc.pid, self.node.vm_pid
        before_real = self.real.roster_counters()
        before = [dict(w.last) for w in members]
        t0 = time.monotonic()
        cpu0 = {"real": cpu_seconds(real_pid), "broker": cpu_seconds(vm_pid) if vm_pid else 0.0,
                "sim": sum(cpu_seconds(w.proc.pid) for w in self.workers),
                "broker_runq": runq_wait_seconds(vm_pid) if vm_pid else 0.0}
        busy0, total0 = machine_ticks()
        time.sleep(seconds)
        elapsed = time.monotonic() - t0
        cpu1 = {"real": cpu_seconds(real_pid), "broker": cpu_seconds(vm_pid) if vm_pid else 0.0,
                "sim": sum(cpu_seconds(w.proc.pid) for w in self.workers),
                "broker_runq": runq_wait_seconds(vm_pid) if vm_pid else 0.0}
        busy1, total1 = machine_ticks()
        after = [dict(w.last) for w in members]
        after_real = self.real.roster_counters()
        sent = received = 0.0
        real_received = float("nan")  # unknown when its status call timed out (a starved broker)
        for b, a in zip(before, after):
            dt = a.get("t", 0) - b.get("t", 0)
            if dt > 0:
                sent += (a["sent"] - b["sent"]) / dt
                received += (a["received"] - b["received"]) / dt
        if before_real and after_real:  # the real gateway's counters span ~ the same window
            sent += (after_real["sent"] - before_real["sent"]) / elapsed
            real_received = (after_real["received"] - before_real["received"]) / elapsed
            received += real_received
        sims = sum(len(w.hosts) for w in self.workers)
        return {
            "real_cpu_pct": 100 * (cpu1["real"] - cpu0["real"]) / elapsed,
            "broker_cpu_pct": 100 * (cpu1["broker"] - cpu0["broker"]) / elapsed,
            "broker_runq_pct": 100 * (cpu1["broker_runq"] - cpu0["broker_runq"]) / elapsed,
            "real_received": real_received,
            "sim_cpu_pct_per_gateway": 100 * (cpu1["sim"] - cpu0["sim"]) / elapsed / max(1, sims),
            "machine_busy_pct": 100 * (busy1 - busy0) / max(1, total1 - total0),
            "published": sent, "delivered": received,
            "real_view": float(after_real.get("entities", "nan")),
            "real_gateways": float(after_real.get("gateways", "nan")),
            "load1": os.getloadavg()[0],
        }

    def roster_backlog(self) -> int:
        """Messages waiting in all roster.* queues (rabbitmqctl: ~0.5 s, some broker CPU)."""
        result = self.node.ctl("list_queues", "name", "messages", "--no-table-headers", "--quiet", check=False)
        total = 0
        for line in result.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].startswith("roster.") and parts[1].isdigit():
                total += int(parts[1])
        return total


def profile_summary(prof: Path, top: int = 25) -> str:
    import io
    import pstats

    out = io.StringIO()
    stats = pstats.Stats(str(prof), stream=out)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def run(interval: float = 5.0, probes: int = 5, windows: int = 3, window_s: float | None = None,
        profile: str | None = None, gateways: tuple[int, ...] = (GATEWAYS,),
        entities: int = ENTITIES, profile_at: int | None = None,
        ab_cache_at: int | None = None) -> dict[str, Any]:
    """Measure the fleet at each size in ``gateways`` (ascending: a saturated size last)."""
    e = entities
    window_s = window_s or max(15.0, 6 * interval)
    result: dict[str, Any] = {"interval": interval, "entities": e, "window_s": window_s, "points": []}
    with Fleet(interval, max(gateways), e) as fleet:
        fleet.start_real()
        time.sleep(interval)  # past its start-up
        alone = [fleet.window(window_s / 2) for _ in range(windows)]
        result["alone"] = alone
        print(f"real gateway alone: {[round(w['real_cpu_pct'], 2) for w in alone]} % CPU", file=sys.stderr)
        for g in sorted(gateways):
            fleet.gateways = g
            fleet.start_simulated(g - 2)  # + the real one + the new one = g
            time.sleep(2 * interval)  # every phase has beaten at least once
            point: dict[str, Any] = {"gateways": g, "converge": [], "steady": []}
            for i in range(probes):
                event = fleet.run_probe()
                point["converge"].append(event)
                print(f"G={g} probe {i}: {event}", file=sys.stderr)
            time.sleep(interval)  # the last probe stays: g gateways in steady state
            for i in range(windows):
                point["steady"].append(fleet.window(window_s))
                point["steady"][-1]["backlog"] = fleet.roster_backlog()
                print(f"G={g} steady {i}: " + ", ".join(f"{k} {v:.4g}" for k, v in point["steady"][-1].items()),
                      file=sys.stderr)
            if g == ab_cache_at and fleet.real is not None:
                fleet.real.stop()
                fleet.real.start(no_cache=True)
                time.sleep(fleet.interval)
                point["steady_no_cache"] = [fleet.window(window_s) for _ in range(windows)]
                print(f"G={g} without roster.json writes: "
                      f"{[round(w['real_cpu_pct'], 2) for w in point['steady_no_cache']]} % CPU", file=sys.stderr)
                fleet.real.stop()
                fleet.real.start()
            result["points"].append(point)
            if profile and g == (profile_at or max(gateways)):
                try:
                    result["profiled"] = {"gateways": g, **profile_real(fleet, Path(profile), window_s)}
                except RuntimeError as exc:  # e.g. a saturated broker that accepts no new connection
                    print(f"profiling failed: {exc}"[:2000], file=sys.stderr)
                    if fleet.real is not None and fleet.real.proc is None:
                        fleet.real.start(timeout=300)
            fleet.stop_simulated()
    return result


def profile_real(fleet: Fleet, out: Path, window_s: float) -> dict[str, float]:
    """One more window with the real gateway under cProfile (restarted; inflates its CPU)."""
    out.mkdir(parents=True, exist_ok=True)
    prof = out / "gateway-roster.prof"
    assert fleet.real is not None
    fleet.real.stop()
    fleet.real.start(profile_to=prof)
    time.sleep(fleet.interval)
    profiled = fleet.window(window_s)
    fleet.real.stop()
    summary = profile_summary(prof)
    (out / "gateway-roster.txt").write_text(summary)
    print(f"profiled window (under cProfile): real gateway {profiled['real_cpu_pct']:.2f} % CPU, "
          f"{profiled['real_received']:.0f} frames/s\n{summary}", file=sys.stderr)
    fleet.real.start()
    return profiled


def rows_from(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Table rows: per fleet size, convergence, traffic, CPU (see the module docstring)."""
    rows: list[dict[str, Any]] = []
    interval, e, alone = result["interval"], result["entities"], result["alone"]

    def row(metric: str, value: float, unit: str, baseline: str, ratio: float | None, note: str = "") -> None:
        rows.append({"benchmark": NAME, "metric": metric,
                     "value": value if value != value else round(value, 3 if value < 10 else 1),
                     "unit": unit, "baseline": baseline,
                     "ratio": None if ratio is None or ratio != ratio else round(ratio, 3), "note": note})

    for point in result["points"]:
        g, steady = point["gateways"], point["steady"]
        n = len(steady)
        med = lambda key, rows=steady: median([r[key] for r in rows])  # noqa: E731
        tag = f"{g}x{e}, interval {interval:g} s"
        events = point["converge"]
        conv = [ev for ev in events if ev and ev.get("event") == "converged"]
        stuck = [ev for ev in events if not ev or ev.get("event") != "converged"]
        conv_iv = [(ev["converged_at"] - ev["consuming_at"]) / interval for ev in conv]
        metric = f"new gateway's view converges to {g * e} entities ({tag})"
        if len(conv) > len(stuck):  # the median is a converged join
            stuck_iv = [float("inf")] * len(stuck)
            value = median(conv_iv + stuck_iv)
            note = (f"median of {len(events)} joins (max {max(conv_iv):.2f}; "
                    f"{median([ev['converged_at'] - ev['started_at'] for ev in conv]):.2f} s from process start)")
        else:
            value = float("nan")
            note = f"only {len(conv)} of {len(events)} joins converged within {PROBE_INTERVALS} intervals"
        if stuck:
            seen = [ev.get("view", 0) for ev in stuck if ev]
            note += f"; {len(stuck)} timed out" + (f" holding {max(seen)} of {g * e}" if seen else "")
        row(metric, value, "intervals", "goal <= 2 intervals", value / 2, note)
        pub_formula = g * (e + 1) / interval
        del_formula = g * g * (e + 1) / interval
        row(f"heartbeats published broker-wide ({tag})", med("published"), "msg/s",
            f"G(E+1)/interval = {pub_formula:.0f} msg/s", med("published") / pub_formula, f"median of {n} windows")
        row(f"heartbeats delivered broker-wide ({tag})", med("delivered"), "msg/s",
            f"G^2(E+1)/interval = {del_formula:.0f} msg/s", med("delivered") / del_formula,
            f"median of {n} windows; roster queues' backlog at window end {med('backlog'):.0f} msgs; broker "
            f"CPU {med('broker_cpu_pct'):.0f} % core, waiting for a CPU {med('broker_runq_pct'):.0f} % "
            f"(machine busy {med('machine_busy_pct'):.0f} %, load1 {med('load1'):.1f})")
        # marginal CPU per received frame over the gateway alone, and the CPU it projects at
        # the full formula rate (when a starved broker delivered less than that)
        base_cpu, base_frames = med("real_cpu_pct", alone), med("real_received", alone)
        per_frame = [1e4 * (r["real_cpu_pct"] - base_cpu) / (r["real_received"] - base_frames)
                     for r in steady if r["real_received"] == r["real_received"]
                     and r["real_received"] > base_frames + 1]
        projected = base_cpu + median(per_frame) * (pub_formula - base_frames) / 1e4 if per_frame else float("nan")
        row(f"real gateway CPU, roster at {tag}", med("real_cpu_pct"), "% core", "goal < 5 % of one core",
            med("real_cpu_pct") / 5,
            f"median of {n} x {result['window_s']:g} s windows; it decoded {med('real_received'):.0f} of "
            f"{pub_formula:.0f} frames/s ({median(per_frame):.0f} us of CPU per extra frame => "
            f"{projected:.2f} % at the full rate); alone (its {e} entities, no fleet) "
            f"{med('real_cpu_pct', alone):.2f} %; view {med('real_view'):.0f} entities on "
            f"{med('real_gateways'):.0f} gateways")
        if point.get("steady_no_cache"):
            nc = point["steady_no_cache"]
            value = med("real_cpu_pct", nc)
            row(f"real gateway CPU without its roster.json writes ({tag})", value, "% core",
                f"stock gateway {med('real_cpu_pct'):.2f} %", value / med("real_cpu_pct"),
                f"bench-only A/B: cache.save_roster stubbed out; median of {len(nc)} windows")
        row(f"simulated gateway CPU, each ({tag})", med("sim_cpu_pct_per_gateway"), "% core",
            f"real gateway {med('real_cpu_pct'):.2f} %",
            med("sim_cpu_pct_per_gateway") / med("real_cpu_pct") if med("real_cpu_pct") else None,
            f"pika SelectConnection, {min(WORKERS, g - 2)} processes sharing {g - 2} gateways; "
            "same frames and RosterView")
    return rows


TABLE = (Column("metric", 62, key("metric")), Column("value", 9, key("value"), ">"), Column("unit", 9, key("unit")),
         Column("baseline", 34, key("baseline")), Column("ratio", 7, ratio_cell, ">"),
         Column(" note", 0, lambda r: " " + r["note"]))


def main(interval: float = 5.0, probes: int = 5, windows: int = 3, profile: str | None = None) -> list[dict[str, Any]]:
    """Rows for bench/run_all.py (see the module docstring); also prints the table."""
    result = run(interval, probes, windows, profile=profile)
    rows = rows_from(result)
    print_table(rows, TABLE)
    return rows


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=5.0, help="roster interval in seconds (default 5)")
    parser.add_argument("--probes", type=int, default=5, help="new gateways joining, one after another")
    parser.add_argument("--windows", type=int, default=3, help="steady-state measuring windows")
    parser.add_argument("--profile", metavar="DIR", help="also profile the real gateway for one window")
    parser.add_argument("--profile-at", type=int, metavar="G", help="fleet size to profile at (default the largest)")
    parser.add_argument("--ab-cache-at", type=int, metavar="G",
                        help="at fleet size G also measure the real gateway with its roster.json write stubbed out")
    parser.add_argument("--json", metavar="FILE", help="also write the raw measurements as JSON")
    parser.add_argument("--gateways", default=str(GATEWAYS),
                        help="G, gateways in the fleet (default 50); a comma list sweeps sizes, e.g. 10,20,30,40,50")
    parser.add_argument("--window", type=float, help="seconds per steady window (default 6 intervals, >= 15)")
    # internal: a worker process of simulated gateways
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    parser.add_argument("--hosts", help=argparse.SUPPRESS)
    parser.add_argument("--entities", type=int, default=ENTITIES, help="E, entities per gateway (default 40)")
    parser.add_argument("--target", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = _parse(sys.argv[1:])
    if args.worker:
        sys.exit(worker(args))
    sizes = tuple(int(g) for g in args.gateways.split(","))
    result = run(args.interval, args.probes, args.windows, args.window, profile=args.profile,
                 gateways=sizes, entities=args.entities, profile_at=args.profile_at, ab_cache_at=args.ab_cache_at)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print_table(rows_from(result), TABLE)
