"""Presence through a roster relay at fleet scale, on a private RabbitMQ node: a real ``bridge
relay`` and ``bridge gateway`` among G − 1 simulated relay-fed gateways. Per fleet size:
deliveries against G/T + G/P and against a same-run fleet without a relay (``--direct-at``),
a joiner's time to a full view, CPU, and with ``--reconnect`` a fleet-wide reconnect and the
fewest entities the real gateway's view held. Prints a table; figures in docs/roster.md.
Heavy: not in run_all.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from _common import Column, key, median, print_table, ratio_cell  # noqa: E402
from roster_real import BRIDGE, RealGateway, cpu_seconds, isolated_env, machine_ticks  # noqa: E402
from roster_sim import Worker  # noqa: E402

NAME = Path(__file__).stem
WORKERS = 4
#: simulated gateways that keep a whole view (a 1,000 × 40 view is ~20 MB each); the others
#: count the relay frames they get, which costs the broker the same
FULL_VIEWS = 8
RELAY_EVERY = 1.0


class RelayProcess:
    """``bridge relay`` with its own XDG dirs against the bench's node."""

    def __init__(self, root: Path, uri: str, name: str = "bench") -> None:
        self.root = root / f"relay-{name}"
        self.env = isolated_env(self.root, f"relay-{name}", uri)
        self.name = name
        self.log_path = self.root / "relay.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [BRIDGE, "relay", "--id", self.name, "--every", f"{RELAY_EVERY:g}"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"relay exited {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            if "serving" in self.log_path.read_text(errors="replace"):
                return
            time.sleep(0.1)
        raise RuntimeError(f"relay not serving after {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None


class RelayFleet:
    """The node, the relay, the real gateway and the simulated gateways."""

    def __init__(self, interval: float, entities: int) -> None:
        from bridgecli.localbroker import LocalNode

        self.interval, self.entities = interval, entities
        self.root = Path(tempfile.mkdtemp(prefix="brelay", dir="/tmp"))
        self.node = LocalNode(self.root / "node")
        self.relay: RelayProcess | None = None
        self.real: RealGateway | None = None
        self.workers: list[Worker] = []

    def __enter__(self) -> RelayFleet:
        self.node.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_sims()
        for part in (self.real, self.relay):
            if part is not None:
                part.stop()
        self.node.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def start_real(self, feed: str) -> None:
        if self.real is not None:
            self.real.stop()
        else:
            self.real = RealGateway(self.root, self.node.uri, self.interval)
            self.real.register(self.entities)
        self.real.env["BRIDGE_ROSTER_RELAY"] = feed
        self.real.start()

    def start_sims(self, count: int, relayed: bool) -> None:
        hosts = [f"s{i:04d}-{uuid.uuid4().hex[:4]}" for i in range(count)]
        if relayed:
            chunks = [(hosts[:FULL_VIEWS], "relay")]
            rest = hosts[FULL_VIEWS:]
            chunks += [(rest[i::WORKERS], "relay-lite") for i in range(WORKERS) if rest[i::WORKERS]]
        else:
            chunks = [(hosts[i::WORKERS], "host") for i in range(WORKERS) if hosts[i::WORKERS]]
        for i, (chunk, protocol) in enumerate(chunks):
            log = self.root / f"worker{len(self.workers)}-{i}.log"
            self.workers.append(Worker(self.node.uri, chunk, self.entities, self.interval, log, protocol=protocol))
        for w in self.workers:
            w.wait_consuming(180)

    def stop_sims(self) -> None:
        for w in self.workers:
            w.stop()
        self.workers = []

    def join(self, target: int, relayed: bool) -> float:
        """A new gateway joins; its time to ``target`` entities, in intervals (NaN: not within 6)."""
        probe = Worker(
            self.node.uri,
            [f"new-{uuid.uuid4().hex[:6]}"],
            self.entities,
            self.interval,
            self.root / "probe.log",
            target=target,
            protocol="relay" if relayed else "host",
        )
        try:
            event = probe.wait_event("converged", 6 * self.interval + 10)
        finally:
            probe.stop()
        if not event:
            return float("nan")
        return (event["converged_at"] - event["consuming_at"]) / self.interval

    def real_view(self) -> tuple[int, int, int, bool]:
        """(entities, frames sent, frames received, connected) of the real gateway."""
        assert self.real is not None
        status = self.real.status() or {}
        text = str(status.get("extra", {}).get("roster", ""))
        match = re.search(r"(\d+) entities on \d+ gateways; frames sent (\d+), received (\d+)", text)
        connected = bool(status.get("broker", {}).get("connected"))
        if not match:
            return -1, 0, 0, connected
        entities, sent, received = map(int, match.groups())
        return entities, sent, received, connected

    def window(self, seconds: float) -> dict[str, float]:
        assert self.real is not None and self.real.proc is not None
        pids = {"real": self.real.proc.pid, "broker": self.node.vm_pid or 0}
        if self.relay is not None and self.relay.proc is not None:
            pids["relay"] = self.relay.proc.pid
        before = [dict(w.last) for w in self.workers]
        _, real_sent0, real_recv0, _ = self.real_view()
        cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items() if pid}
        busy0, total0 = machine_ticks()
        t0 = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - t0
        cpu1 = {name: cpu_seconds(pid) for name, pid in pids.items() if pid}
        busy1, total1 = machine_ticks()
        entities, real_sent1, real_recv1, _ = self.real_view()
        sent = received = 0.0
        for b, a in zip(before, [dict(w.last) for w in self.workers], strict=True):
            dt = a.get("t", 0) - b.get("t", 0)
            if dt > 0:
                sent += (a["sent"] - b["sent"]) / dt
                received += (a["received"] - b["received"]) / dt
        sent += (real_sent1 - real_sent0) / elapsed
        received += (real_recv1 - real_recv0) / elapsed
        if self.relay is not None:
            received += sent  # the relay's queue gets one copy of every host frame
        row = {f"{name}_cpu_pct": 100 * (cpu1[name] - cpu0[name]) / elapsed for name in cpu0}
        row.update(
            {
                "published": sent,
                "delivered": received,
                "real_view": float(entities),
                "machine_busy_pct": 100 * (busy1 - busy0) / max(1, total1 - total0),
                "load1": os.getloadavg()[0],
            }
        )
        return row

    def reconnect(self, how: str, hosts: int) -> dict[str, float]:
        """Break every connection (``close``: close_all_connections; ``restart``:
        stop_app/start_app) and follow the fleet back: seconds until every gateway consumes
        again, the broker's own part of that, and the least the real gateway's view held."""
        before, _, _, _ = self.real_view()
        least = before
        t0 = time.monotonic()
        if how == "restart":
            self.node.ctl("stop_app")
            self.node.ctl("start_app")
        else:
            self.node.ctl("close_all_connections", "bench reconnect")
        broker_back = time.monotonic() - t0
        recovered = float("nan")
        deadline = t0 + 20 * self.interval
        while time.monotonic() < deadline:
            entities, _, _, connected = self.real_view()
            if entities >= 0:
                least = min(least, entities)
            consuming = sum(w.last.get("consuming", 0) for w in self.workers)
            if recovered != recovered and consuming >= hosts and connected:
                recovered = time.monotonic() - t0
            if recovered == recovered and time.monotonic() - t0 > recovered + 3 * self.interval:
                break  # watched the view for three intervals after recovery
            time.sleep(0.2)
        return {"recovered_s": recovered, "broker_s": broker_back, "before": before, "least": least}


def run(sizes: list[int], interval: float, entities: int, window: float, direct_at: int | None, how: str) -> dict:
    result: dict[str, Any] = {"interval": interval, "entities": entities, "points": []}
    with RelayFleet(interval, entities) as fleet:
        if direct_at:
            fleet.start_real("off")
            fleet.start_sims(direct_at - 1, relayed=False)
            time.sleep(2 * interval)
            point = {"gateways": direct_at, "relay": False, "steady": [fleet.window(window) for _ in range(2)]}
            point["join"] = [fleet.join(direct_at * entities, relayed=False) for _ in range(2)]
            result["points"].append(point)
            print(f"direct G={direct_at}: {point}", file=sys.stderr)
            fleet.stop_sims()
        fleet.relay = RelayProcess(fleet.root, fleet.node.uri)
        fleet.relay.start()
        fleet.start_real("auto")
        for g in sorted(sizes):
            fleet.stop_sims()
            fleet.start_sims(g - 1, relayed=True)
            time.sleep(6 * interval)  # past the joins' forwarded full frames: steady state
            point = {"gateways": g, "relay": True, "steady": [fleet.window(window) for _ in range(3)]}
            point["join"] = [fleet.join(g * entities, relayed=True) for _ in range(3)]
            if how != "none" and g == max(sizes):
                point["reconnect"] = fleet.reconnect(how, g - 1)
            result["points"].append(point)
            print(f"relay G={g}: {json.dumps(point)}", file=sys.stderr)
    return result


def rows_from(result: dict[str, Any]) -> list[dict[str, Any]]:
    interval, e = result["interval"], result["entities"]
    rows: list[dict[str, Any]] = []
    direct = next((p for p in result["points"] if not p["relay"]), None)

    def row(metric: str, value: float, unit: str, baseline: str, ratio: float | None, note: str = "") -> None:
        rounded = value if value != value else round(value, 3 if abs(value) < 10 else 1)
        ratio = None if ratio is None or ratio != ratio else round(ratio, 3)
        rows.append({"benchmark": NAME, "metric": metric, "value": rounded, "unit": unit, "baseline": baseline})
        rows[-1].update({"ratio": ratio, "note": note})

    for p in result["points"]:
        g, steady = p["gateways"], p["steady"]
        med = lambda name, rows=steady: median([r.get(name, float("nan")) for r in rows])  # noqa: E731
        tag = f"G={g}, E={e}, T={interval:g} s" + ("" if p["relay"] else ", no relay")
        formula = g / interval + g / RELAY_EVERY if p["relay"] else g * g / interval
        shown = "G/T + G/P" if p["relay"] else "G^2/T"
        note = f"broker {med('broker_cpu_pct'):.1f} % core; load1 {med('load1'):.1f}"
        if p["relay"] and direct is not None:
            unrelayed = median([r["delivered"] for r in direct["steady"]])
            note += f"; {med('delivered') / unrelayed:.3f}x of no relay at G={direct['gateways']}"
        row(
            f"frames delivered ({tag})",
            med("delivered"),
            "msg/s",
            f"{shown} = {formula:.0f}",
            med("delivered") / formula,
            note,
        )
        joins = p["join"]
        row(
            f"joiner's view complete ({tag})",
            median(joins),
            "intervals",
            "goal <= 2",
            median(joins) / 2,
            f"max {max(joins):.2f} of {len(joins)}",
        )
        row(
            f"real gateway CPU ({tag})",
            med("real_cpu_pct"),
            "% core",
            "goal < 5 %",
            med("real_cpu_pct") / 5,
            f"view {med('real_view'):.0f} entities",
        )
        if p["relay"]:
            row(f"relay CPU ({tag})", med("relay_cpu_pct"), "% core", "", None)
        if "reconnect" in p:
            r = p["reconnect"]
            iv = r["recovered_s"] / interval
            note = f"broker's own {r['broker_s'] / interval:.2f} T; view held at least {r['least']} of {r['before']}"
            row(f"fleet-wide reconnect ({tag})", iv, "intervals", "goal <= 3", iv / 3, note)
    return rows


TABLE = (
    Column("metric", 48, key("metric")),
    Column("value", 9, key("value"), ">"),
    Column("unit", 10, key("unit")),
    Column("baseline", 20, key("baseline")),
    Column("ratio", 7, ratio_cell, ">"),
    Column(" note", 0, lambda r: " " + r["note"]),
)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateways", default="100,300,1000", help="fleet sizes through the relay")
    parser.add_argument("--direct-at", default="100", help="fleet size of the no-relay baseline ('' for none)")
    parser.add_argument("--entities", type=int, default=40)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--window", type=float, default=15.0, help="seconds per measuring window")
    parser.add_argument("--reconnect", default="close", choices=("close", "restart", "none"))
    parser.add_argument("--json", metavar="FILE", help="also write the raw measurements")
    args = parser.parse_args(argv)
    sizes = [int(g) for g in args.gateways.split(",") if g]
    direct = int(args.direct_at) if args.direct_at else None
    result = run(sizes, args.interval, args.entities, args.window, direct, args.reconnect)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    rows = rows_from(result)
    print_table(rows, TABLE)
    return rows


if __name__ == "__main__":
    main()
