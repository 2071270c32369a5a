"""The presence roster at scale against a real RabbitMQ node: one real ``bridge gateway`` with
40 ``hold`` entities among G − 2 simulated gateways (``roster_sim``, a few worker processes)
and a joining G-th. Measures heartbeats published and delivered per second against the
formula, the joiner's convergence in intervals, and the CPU of the broker, the real gateway
and a simulated one, as rows for bench/run_all.py. Method and figures: docs/roster.md and
docs/bench-methods.md.
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
NAME = Path(__file__).stem

GATEWAYS = 50
ENTITIES = 40
PROBE_INTERVALS = 6  # a new gateway that has not converged by then is reported as timed out
WORKERS = 4  # processes holding the simulated gateways (2 cores: a few, not one per gateway)
#: the simulated gateways' roster protocol (``--protocol``): per-entity sims make the real
#: gateway send per-entity frames too, as it does beside old gateways
SIM_PROTOCOL = "host"

if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))
if str(BENCH) not in sys.path:  # run_all loads the scripts by path
    sys.path.insert(0, str(BENCH))

from _common import Column, key, median, print_table, ratio_cell  # noqa: E402
from roster_real import RealGateway, cpu_seconds, machine_ticks, runq_wait_seconds  # noqa: E402
from roster_sim import Worker, worker  # noqa: E402

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

    def __enter__(self) -> Fleet:
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
                self.workers.append(
                    Worker(
                        self.node.uri,
                        chunk,
                        self.entities,
                        self.interval,
                        self.root / f"worker{i}.log",
                        protocol=SIM_PROTOCOL,
                    )
                )
        for w in self.workers:
            w.wait_consuming()

    def run_probe(self) -> dict[str, Any]:
        """A new gateway joins; returns its convergence event, or a ``timeout`` event with the
        size its view reached after PROBE_INTERVALS intervals."""
        if self.probe is not None:
            self.probe.stop()
            time.sleep(0.5)  # its gone frames reach the others
        target = self.gateways * self.entities
        self.probe = Worker(
            self.node.uri,
            [f"new-{uuid.uuid4().hex[:6]}"],
            self.entities,
            self.interval,
            self.root / "probe.log",
            target=target,
            protocol=SIM_PROTOCOL,
        )
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
        cpu0 = {
            "real": cpu_seconds(real_pid),
            "broker": cpu_seconds(vm_pid) if vm_pid else 0.0,
            "sim": sum(cpu_seconds(w.proc.pid) for w in self.workers),
            "broker_runq": runq_wait_seconds(vm_pid) if vm_pid else 0.0,
        }
        busy0, total0 = machine_ticks()
        time.sleep(seconds)
        elapsed = time.monotonic() - t0
        cpu1 = {
            "real": cpu_seconds(real_pid),
            "broker": cpu_seconds(vm_pid) if vm_pid else 0.0,
            "sim": sum(cpu_seconds(w.proc.pid) for w in self.workers),
            "broker_runq": runq_wait_seconds(vm_pid) if vm_pid else 0.0,
        }
        busy1, total1 = machine_ticks()
        after = [dict(w.last) for w in members]
        after_real = self.real.roster_counters()
        sent = received = 0.0
        real_received = float("nan")  # unknown when its status call timed out (a starved broker)
        for b, a in zip(before, after, strict=False):
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
            "published": sent,
            "delivered": received,
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


def run(
    interval: float = 5.0,
    probes: int = 5,
    windows: int = 3,
    window_s: float | None = None,
    profile: str | None = None,
    gateways: tuple[int, ...] = (GATEWAYS,),
    entities: int = ENTITIES,
    profile_at: int | None = None,
    ab_cache_at: int | None = None,
) -> dict[str, Any]:
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
                print(
                    f"G={g} steady {i}: " + ", ".join(f"{k} {v:.4g}" for k, v in point["steady"][-1].items()),
                    file=sys.stderr,
                )
            if g == ab_cache_at and fleet.real is not None:
                fleet.real.stop()
                fleet.real.start(no_cache=True)
                time.sleep(fleet.interval)
                point["steady_no_cache"] = [fleet.window(window_s) for _ in range(windows)]
                print(
                    f"G={g} without roster.json writes: "
                    f"{[round(w['real_cpu_pct'], 2) for w in point['steady_no_cache']]} % CPU",
                    file=sys.stderr,
                )
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
    print(
        f"profiled window (under cProfile): real gateway {profiled['real_cpu_pct']:.2f} % CPU, "
        f"{profiled['real_received']:.0f} frames/s\n{summary}",
        file=sys.stderr,
    )
    fleet.real.start()
    return profiled


def rows_from(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Table rows: per fleet size, convergence, traffic, CPU (see the module docstring)."""
    rows: list[dict[str, Any]] = []
    interval, e, alone = result["interval"], result["entities"], result["alone"]

    def row(metric: str, value: float, unit: str, baseline: str, ratio: float | None, note: str = "") -> None:
        rows.append(
            {
                "benchmark": NAME,
                "metric": metric,
                "value": value if value != value else round(value, 3 if value < 10 else 1),
                "unit": unit,
                "baseline": baseline,
                "ratio": None if ratio is None or ratio != ratio else round(ratio, 3),
                "note": note,
            }
        )

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
            note = (
                f"median of {len(events)} joins (max {max(conv_iv):.2f}; "
                f"{median([ev['converged_at'] - ev['started_at'] for ev in conv]):.2f} s from process start)"
            )
        else:
            value = float("nan")
            note = f"only {len(conv)} of {len(events)} joins converged within {PROBE_INTERVALS} intervals"
        if stuck:
            seen = [ev.get("view", 0) for ev in stuck if ev]
            note += f"; {len(stuck)} timed out" + (f" holding {max(seen)} of {g * e}" if seen else "")
        row(metric, value, "intervals", "goal <= 2 intervals", value / 2, note)
        per_host, per = (e + 1, "(E+1)") if SIM_PROTOCOL == "entity" else (1, "")
        pub_formula = g * per_host / interval
        del_formula = g * g * per_host / interval
        row(
            f"heartbeats published broker-wide ({tag})",
            med("published"),
            "msg/s",
            f"G{per}/interval = {pub_formula:.0f} msg/s",
            med("published") / pub_formula,
            f"median of {n} windows",
        )
        row(
            f"heartbeats delivered broker-wide ({tag})",
            med("delivered"),
            "msg/s",
            f"G^2{per}/interval = {del_formula:.0f} msg/s",
            med("delivered") / del_formula,
            f"median of {n} windows; roster queues' backlog at window end {med('backlog'):.0f} msgs; broker "
            f"CPU {med('broker_cpu_pct'):.0f} % core, waiting for a CPU {med('broker_runq_pct'):.0f} % "
            f"(machine busy {med('machine_busy_pct'):.0f} %, load1 {med('load1'):.1f})",
        )
        # marginal CPU per received frame over the gateway alone, and the CPU it projects at
        # the full formula rate (when a starved broker delivered less than that)
        base_cpu, base_frames = med("real_cpu_pct", alone), med("real_received", alone)
        per_frame = [
            1e4 * (r["real_cpu_pct"] - base_cpu) / (r["real_received"] - base_frames)
            for r in steady
            if r["real_received"] == r["real_received"] and r["real_received"] > base_frames + 1
        ]
        projected = base_cpu + median(per_frame) * (pub_formula - base_frames) / 1e4 if per_frame else float("nan")
        row(
            f"real gateway CPU, roster at {tag}",
            med("real_cpu_pct"),
            "% core",
            "goal < 5 % of one core",
            med("real_cpu_pct") / 5,
            f"median of {n} x {result['window_s']:g} s windows; it decoded {med('real_received'):.0f} of "
            f"{pub_formula:.0f} frames/s ({median(per_frame):.0f} us of CPU per extra frame => "
            f"{projected:.2f} % at the full rate); alone (its {e} entities, no fleet) "
            f"{med('real_cpu_pct', alone):.2f} %; view {med('real_view'):.0f} entities on "
            f"{med('real_gateways'):.0f} gateways",
        )
        if point.get("steady_no_cache"):
            nc = point["steady_no_cache"]
            value = med("real_cpu_pct", nc)
            row(
                f"real gateway CPU without its roster.json writes ({tag})",
                value,
                "% core",
                f"stock gateway {med('real_cpu_pct'):.2f} %",
                value / med("real_cpu_pct"),
                f"bench-only A/B: cache.save_roster stubbed out; median of {len(nc)} windows",
            )
        row(
            f"simulated gateway CPU, each ({tag})",
            med("sim_cpu_pct_per_gateway"),
            "% core",
            f"real gateway {med('real_cpu_pct'):.2f} %",
            med("sim_cpu_pct_per_gateway") / med("real_cpu_pct") if med("real_cpu_pct") else None,
            f"pika SelectConnection, {min(WORKERS, g - 2)} processes sharing {g - 2} gateways; "
            "same frames and RosterView",
        )
    return rows


TABLE = (
    Column("metric", 62, key("metric")),
    Column("value", 9, key("value"), ">"),
    Column("unit", 9, key("unit")),
    Column("baseline", 34, key("baseline")),
    Column("ratio", 7, ratio_cell, ">"),
    Column(" note", 0, lambda r: " " + r["note"]),
)


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
    parser.add_argument(
        "--ab-cache-at",
        type=int,
        metavar="G",
        help="at fleet size G also measure the real gateway with its roster.json write stubbed out",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the raw measurements as JSON")
    parser.add_argument(
        "--gateways",
        default=str(GATEWAYS),
        help="G, gateways in the fleet (default 50); a comma list sweeps sizes, e.g. 10,20,30,40,50",
    )
    parser.add_argument("--window", type=float, help="seconds per steady window (default 6 intervals, >= 15)")
    # internal: a worker process of simulated gateways
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    parser.add_argument("--hosts", help=argparse.SUPPRESS)
    parser.add_argument("--entities", type=int, default=ENTITIES, help="E, entities per gateway (default 40)")
    parser.add_argument("--target", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--protocol",
        default="host",
        choices=("host", "entity", "relay", "relay-lite"),
        help="the simulated gateways' roster frames: host frames (as gateways send them, default) or per-entity",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = _parse(sys.argv[1:])
    if args.worker:
        sys.exit(worker(args))
    sizes = tuple(int(g) for g in args.gateways.split(","))
    SIM_PROTOCOL = args.protocol
    result = run(
        args.interval,
        args.probes,
        args.windows,
        args.window,
        profile=args.profile,
        gateways=sizes,
        entities=args.entities,
        profile_at=args.profile_at,
        ab_cache_at=args.ab_cache_at,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print_table(rows_from(result), TABLE)
