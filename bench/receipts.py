"""What receipts cost: the U1 round trip through two gateways with receipts on, against the same
build with ``receipts.enabled = false``, in interleaved rounds (goal: p50 <= 1.10x), and the
receipt frames the gateways publish per delivered message (goal: <= 2).

Each round trip delivers two messages (the task on host B, its reply on host A), so the
frames per delivered message are the two gateways' frame counts over twice the round trips
(warm-up included: every trip is counted). Asserts nothing.
Run: ``.venv/bin/python bench/receipts.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from _common import median, pct  # noqa: E402
from bench_hosts import Bench  # noqa: E402
from messaging_round_trip import bridge_round_trips  # noqa: E402


def _frames(host: Any) -> int:
    line = json.loads(host.bridge("status", "--json").stdout)["extra"]["receipts"]
    match = re.search(r"in (\d+) frames", line)
    return int(match.group(1)) if match else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer round trips (a smoke run)")
    args = parser.parse_args()
    count, rounds, warmup = (40, 2, 10) if args.quick else (300, 6, 20)
    per_round = -(-count // rounds)
    samples: dict[str, list[float]] = {"on": [], "off": []}
    frames = {"count": 0, "trips": 0}

    def counted(a: Any, b: Any) -> None:
        frames["count"] += _frames(a) + _frames(b)
        frames["trips"] += per_round + warmup + 1  # and the warm-up trip before the timed ones

    with Bench(quick=args.quick) as bench:
        for i in range(rounds):
            order = ["on", "off"] if i % 2 == 0 else ["off", "on"]
            for case in order:
                env = {"BRIDGE_RECEIPTS_ENABLED": "true" if case == "on" else "false"}
                samples[case] += bridge_round_trips(
                    bench,
                    per_round,
                    warmup,
                    env_for=lambda _name, env=env: env,
                    before_stop=counted if case == "on" else None,
                )
    on, off = samples["on"], samples["off"]
    print(f"U1 round trip, {len(on)} per case in {rounds} interleaved rounds")
    print(f"  receipts off: p50 {median(off):.2f} ms  p99 {pct(off, 99):.2f} ms")
    print(f"  receipts on:  p50 {median(on):.2f} ms  p99 {pct(on, 99):.2f} ms")
    print(f"  ratio on/off: p50 {median(on) / median(off):.3f}x (goal <= 1.10x)")
    delivered = 2 * frames["trips"]
    print(
        f"receipt frames per delivered message: {frames['count'] / delivered:.2f} "
        f"({frames['count']} frames for {delivered} messages; goal <= 2)"
    )


if __name__ == "__main__":
    main()
