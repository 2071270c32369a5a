"""Channel fan-out: one send to a 100-member channel, timed until the last member holds its
copy, against 100 separate sends to the same members, in interleaved rounds (goal: p50 <=
0.2x).

Host A sends through its gateway's local API (one ``send`` to ``#bench``, or one per member
gid, each confirmed before the next, as a script sending to each would); the 100 hold members
live on host B, whose message store is read until it has every copy. Asserts nothing.
Run: ``.venv/bin/python bench/channel_fanout.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from _common import median, pct  # noqa: E402
from bench_hosts import Bench  # noqa: E402

MEMBERS = 100


def _stored(db: sqlite3.Connection) -> int:
    return db.execute("SELECT COUNT(*) FROM messages").fetchone()[0]


def _until(db: sqlite3.Connection, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while _stored(db) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {_stored(db)} of {count} messages arrived")
        time.sleep(0.0005)


def main() -> None:
    from bridgecli.gateway.client import GatewayClient

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    args = parser.parse_args()
    rounds = 4 if args.quick else 20
    samples: dict[str, list[float]] = {"channel": [], "separate": []}
    with Bench(quick=args.quick) as bench:
        a, b = bench.host("fana"), bench.host("fanb")
        lead = a.register("lead", "hold", role="main")
        members = [b.register(f"m{i}", "hold") for i in range(MEMBERS)]
        a.start_gateway()
        b.start_gateway()
        with GatewayClient.require(b.socket) as client:
            for gid in members:
                client.call("channel_join", name="bench", member=gid)
        sender = GatewayClient.require(a.socket)
        db = sqlite3.connect(b.db)

        def channel() -> None:
            sender.call("send", command="send", sender=lead, target="#bench", content="review this")

        def separate() -> None:
            for gid in members:
                sender.call("send", command="send", sender=lead, target=gid, content="review this")

        cases = {"channel": channel, "separate": separate}
        for i in range(rounds + 1):  # the first round warms up
            for name in ("channel", "separate") if i % 2 == 0 else ("separate", "channel"):
                base = _stored(db)
                started = time.perf_counter()
                cases[name]()
                _until(db, base + MEMBERS)
                if i:
                    samples[name].append((time.perf_counter() - started) * 1000)
        sender.close()
    one, each = samples["channel"], samples["separate"]
    print(f"fan-out to {MEMBERS} members on another host, {len(one)} sends per case, interleaved")
    print(f"  100 separate sends: p50 {median(each):.1f} ms  p99 {pct(each, 0.99):.1f} ms")
    print(f"  one channel send:   p50 {median(one):.1f} ms  p99 {pct(one, 0.99):.1f} ms")
    print(f"  ratio channel/separate: p50 {median(one) / median(each):.3f}x (goal <= 0.2x)")


if __name__ == "__main__":
    main()
