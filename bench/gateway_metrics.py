"""Gateway metrics' cost: delivery throughput into the no-op backend with ``--metrics`` on
against off, alternating rounds in one run (goal ≥ 0.97x), and the time of one ``/metrics``
scrape of a live gateway with 2,000 local entities (each in its roster too).
Run: ``.venv/bin/python bench/gateway_metrics.py [--quick]``. Asserts nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:  # run_all loads this by path
    sys.path.insert(0, str(BENCH))

from _common import Column, key, median, pct, print_table, ratio_cell  # noqa: E402
from bench_hosts import PYTHON, Bench  # noqa: E402
from messaging_delivery import bodies, gateway_round  # noqa: E402

GOAL = 0.97
ENTITIES = 2000
_ADD_ENTITIES = r"""
import sys
from bridgecli.hoststate.entities import open_registry
registry, host, count = open_registry(), sys.argv[1], int(sys.argv[2])
for i in range(count):
    registry.add(label=f"e{i:05d}", role="agent", deliver="hold", host=host)
"""


def _metrics_env() -> dict[str, str]:
    from bridgecli.nodeprocess import free_port

    return {"BRIDGE_GATEWAY_METRICS": str(free_port())}


def throughput(bench: Bench, rounds: int, n: int) -> dict[str, list[float]]:
    """Alternating rounds, metrics off and on, each on a fresh host: msg/s."""
    bodies_for = bodies(n)
    off, on = [], []
    for i in range(rounds):
        order = [(off, None), (on, _metrics_env())]
        for samples, env in order if i % 2 == 0 else order[::-1]:
            samples.append(gateway_round(bench, bodies_for, n, extra_env=env))
    return {"off": off, "on": on}


def scrape_times(bench: Bench, scrapes: int) -> dict[str, Any]:
    """Scrape a gateway serving ``ENTITIES`` hold entities, once its roster holds them all."""
    env = _metrics_env()
    host = bench.host("scrape", env)
    subprocess.run([PYTHON, "-c", _ADD_ENTITIES, host.name, str(ENTITIES)], env=host.env, check=True, timeout=300)
    host.start_gateway(timeout=300)
    url = f"http://127.0.0.1:{env['BRIDGE_GATEWAY_METRICS']}/metrics"
    try:
        deadline = time.monotonic() + 120
        while f"bridge_roster_entities {float(ENTITIES)}" not in _get(url) and time.monotonic() < deadline:
            time.sleep(0.5)
        ms, size = [], 0
        for _ in range(scrapes):
            start = time.perf_counter()
            size = len(_get(url))
            ms.append((time.perf_counter() - start) * 1000)
    finally:
        host.stop_gateway()
    return {"ms": ms, "bytes": size}


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.read().decode()


def rows_from(tput: dict[str, list[float]], scrape: dict[str, Any], n: int) -> list[dict[str, Any]]:
    off, on = median(tput["off"]), median(tput["on"])
    ratio = on / off
    verdict = "met" if ratio >= GOAL else "MISSED"
    rounds = len(tput["on"])
    return [
        {
            "benchmark": "gateway_metrics",
            "metric": f"delivery into noop backend with --metrics on ({n} msgs)",
            "value": round(on, 1),
            "unit": "msg/s",
            "baseline": f"same, metrics off {off:.1f} msg/s",
            "ratio": round(ratio, 2),
            "note": f"median of {rounds} alternating rounds; goal ≥ {GOAL}x: {verdict}",
        },
        {
            "benchmark": "gateway_metrics",
            "metric": f"one /metrics scrape, {ENTITIES} local entities in the roster",
            "value": round(median(scrape["ms"]), 2),
            "unit": "ms",
            "baseline": "",
            "ratio": None,
            "note": f"median of {len(scrape['ms'])}, p95 {pct(scrape['ms'], 0.95):.2f} ms; {scrape['bytes']} bytes",
        },
    ]


def main(quick: bool = False) -> list[dict[str, Any]]:
    rounds, n, scrapes = (2, 2000, 10) if quick else (6, 5000, 30)
    with Bench(quick) as bench:
        tput = throughput(bench, rounds, n)
        scrape = scrape_times(bench, scrapes)
    rows = rows_from(tput, scrape, n)
    columns = [
        Column("metric", 56, key("metric")),
        Column("value", 9, key("value"), ">"),
        Column("unit", 6, key("unit")),
        Column("ratio", 6, ratio_cell, ">"),
        Column("baseline / note", 0, lambda row: f"{row['baseline']} {row['note']}".strip()),
    ]
    print_table(rows, columns)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, smaller rounds")
    main(parser.parse_args().quick)
