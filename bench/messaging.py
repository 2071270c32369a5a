"""Messaging through the gateway against raw AMQP clients on the same private broker: (a)
delivery, (b)/(b2) one-shot and bulk send, (c) the U1 round trip, each a ratio against a
baseline of the same run. Method and goals: docs/bench-methods.md. Asserts nothing.
Run: ``.venv/bin/python bench/messaging.py [--quick] [--profile DIR]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:  # run_all and u1_floor load these by path
    sys.path.insert(0, str(BENCH))

from _common import Column, key, median, pct, print_table  # noqa: E402
from bench_hosts import Bench  # noqa: E402
from messaging_delivery import bench_delivery, bodies, gateway_round  # noqa: E402
from messaging_round_trip import bench_round_trip  # noqa: E402
from messaging_send import bench_oneshot  # noqa: E402

# --- table -------------------------------------------------------------------------------


def _row(
    metric: str,
    value: float,
    unit: str,
    baseline: str,
    ratio: float | None,
    goal: str,
    met: bool | None,
    note: str = "",
) -> dict[str, Any]:
    verdict = "" if met is None else ("met" if met else "MISSED")
    text = "; ".join(part for part in (f"goal {goal}: {verdict}" if goal else "", note) if part)
    return {
        "benchmark": "messaging",
        "metric": metric,
        "value": round(value, 1),
        "unit": unit,
        "baseline": baseline,
        "ratio": None if ratio is None else round(ratio, 2),
        "note": text,
        "goal": goal,
        "met": met,
    }


def rows_from(delivery: dict, oneshot: dict, rtt: dict) -> list[dict[str, Any]]:
    """run_all rows (plus ``goal``/``met`` for the printed table) from the raw samples."""
    rows = []
    gw, raw = median(delivery["gateway"]), median(delivery["raw"])
    rows.append(
        _row(
            f"(a) delivery into noop backend, prefetch {delivery['prefetch']}, dedup on",
            gw,
            "msg/s",
            f"raw pika manual-ack consumer {raw:.0f} msg/s",
            gw / raw,
            ">= 1.0x",
            gw / raw >= 1.0,
            f"N={delivery['n']}, median of {len(delivery['gateway'])} rounds",
        )
    )
    s = {name: median(v) for name, v in oneshot["samples"].items()}
    pika_import = "imports pika" if oneshot["gateway_imports_pika"] else "no pika import"
    rows.append(
        _row(
            "(b) bridge send via gateway vs pika script",
            s["gateway"],
            "ms",
            f"pika connect+confirm+publish script {s['pika']:.1f} ms",
            s["gateway"] / s["pika"],
            "<= 0.45x",
            s["gateway"] / s["pika"] <= 0.45 and not oneshot["gateway_imports_pika"],
            f"{pika_import} (-X importtime); median of {oneshot['runs']}",
        )
    )
    rows.append(
        _row(
            "(b) bridge send via gateway vs amqp-publish",
            s["gateway"],
            "ms",
            f"amqp-publish -p {s['amqp-publish']:.1f} ms",
            s["gateway"] / s["amqp-publish"],
            "<= 4x",
            s["gateway"] / s["amqp-publish"] <= 4,
        )
    )
    rows.append(
        _row(
            "(b) floor: least Python gateway client vs amqp-publish",
            s["floor"],
            "ms",
            f"amqp-publish -p {s['amqp-publish']:.1f} ms",
            s["floor"] / s["amqp-publish"],
            "",
            None,
            f"console script's interpreter: import _socket and bridgecli.wirejson, one send line "
            f"(bench/messaging_send.py); bridge send = {s['gateway'] / s['floor']:.2f}x this",
        )
    )
    rows.append(
        _row(
            "(b) bridge send direct (no gateway) vs pika script",
            s["direct"],
            "ms",
            f"pika connect+confirm+publish script {s['pika']:.1f} ms",
            s["direct"] / s["pika"],
            "",
            None,
            f"{'imports pika' if oneshot['direct_imports_pika'] else 'no pika import'}; "
            f"{s['direct'] / s['amqp-publish']:.1f}x amqp-publish",
        )
    )
    bb, ba = median(oneshot["bulk_bridge"]), median(oneshot["bulk_amqp"])
    rows.append(
        _row(
            f"(b2) bridge send - --lines, {oneshot['bulk_n']} lines via gateway",
            bb,
            "ms",
            f"{oneshot['bulk_n']} x amqp-publish -p {ba:.0f} ms",
            bb / ba,
            ">= 5x faster (<= 0.2x)",
            ba / bb >= 5,
            f"{ba / bb:.1f}x faster; median of {len(oneshot['bulk_bridge'])}",
        )
    )
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        bv, rv = pct(rtt["bridge"], q), pct(rtt["raw"], q)
        goal = 3.0 if label == "p50" else None  # p99's goal is against the floor (u1_floor)
        rows.append(
            _row(
                f"(c) U1 round trip {label}, two gateways",
                bv,
                "ms",
                f"raw pika request/reply (confirms, persistent) {rv:.2f} ms",
                bv / rv,
                f"<= {goal:g}x" if goal else "",
                None if goal is None else bv / rv <= goal,
                f"{rtt['count']} sequential round trips each, {rtt['rounds']} interleaved rounds",
            )
        )
    return rows


def _met(row: dict[str, Any]) -> str:
    return "" if row["met"] is None else ("yes" if row["met"] else "NO")


TABLE = (
    Column("metric", 58, key("metric")),
    Column("bridge", 11, lambda r: f"{r['value']:>7} {r['unit']:<3}", ">"),
    Column("baseline", 44, key("baseline"), ">"),
    Column("ratio", 7, lambda r: "" if r["ratio"] is None else f"{r['ratio']}x", ">"),
    Column("goal", 22, key("goal"), ">"),
    Column("met?", 4, _met),
)


def main(quick: bool = False, profile: str | None = None) -> list[dict[str, Any]]:
    """Rows for bench/run_all.py (see the module docstring); also prints the table."""
    load_before = os.getloadavg()[0]
    with Bench(quick) as bench:
        delivery = bench_delivery(bench, rounds=1 if quick else 3, n=2000 if quick else 10000)
        oneshot = bench_oneshot(bench, runs=10 if quick else 30, bulk_rounds=1 if quick else 3, bulk_n=1000)
        rtt = bench_round_trip(bench, count=100 if quick else 500, rounds=2 if quick else 5)
        if profile:
            out = Path(profile)
            out.mkdir(parents=True, exist_ok=True)
            rate = gateway_round(bench, bodies(10000), 10000, profile_to=out / "gateway-delivery.prof")
            print(f"profiled gateway round: {rate:.0f} msg/s (under cProfile)", file=sys.stderr)
            import io
            import pstats

            text = io.StringIO()
            pstats.Stats(str(out / "gateway-delivery.prof"), stream=text).sort_stats("cumtime").print_stats(25)
            (out / "gateway-delivery.txt").write_text(text.getvalue())
    rows = rows_from(delivery, oneshot, rtt)
    shared = f"shared machine: load avg {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    rows[0]["note"] += f"; {shared}"
    print_table(rows, TABLE)
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
