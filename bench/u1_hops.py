"""Where U1's time goes inside the two gateways, stage by stage (thread hand-offs marked),
beside the same stages of the floor (``u1_floor.py``). The gateways are stamped from outside,
by a ``sitecustomize`` that wraps public entry points; the method: docs/bench-methods.md.
Asserts nothing; not in ``run_all.py``, since each stamp costs a few microseconds.
Run: ``.venv/bin/python bench/u1_hops.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from _common import median  # noqa: E402
from bench_hosts import Bench  # noqa: E402
from messaging_round_trip import bridge_round_trips  # noqa: E402
from u1_floor import floor_round_trips  # noqa: E402

_HOOKS = r"""
import functools, os, time
_PATH = os.environ.get("U1_HOPS_FILE")
if _PATH:
    _fd = os.open(_PATH, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def mark(label):
        os.write(_fd, f"{time.monotonic_ns()} {label}\n".encode())

    def wrap(original, before=None, after=None):
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            if before:
                mark(before)
            try:
                return original(*args, **kwargs)
            finally:
                if after:
                    mark(after)

        return wrapper

    def around(owner, name, before=None, after=None):
        setattr(owner, name, wrap(getattr(owner, name), before, after))

    from bridgecli.gateway.api import operations, sending
    from bridgecli.gateway.burst import Burst
    from bridgecli.gateway.api.connections import SocketAnswer
    from bridgecli.gateway.intake import Intake
    from bridgecli.gateway.publishing import PublishLane
    from bridgecli.hoststate.store import Store

    for op in ("poll", "confirm"):
        operations.OPS[op] = wrap(operations.OPS[op], f"op.{op}", f"op.{op}.done")
    around(sending, "start", "op.send")
    around(sending, "finish", None, "op.send.done")
    around(PublishLane, "publish_in_loop", "lane.run", "lane.ran")
    around(Intake, "on_message", "io.msg")
    around(Burst, "commit", None, "io.committed")
    around(SocketAnswer, "answer", None, "answer.sent")
    around(Store, "sync", "io.sync", "io.synced")
"""


#: the U1 path as (gateway, event) pairs, in order; A is the sender's host, B the worker's.
#: A stage is the time from one event to the next; ``hand-off`` marks the thread hand-offs
#: a core with one event loop for the connections and the socket would not have.
PATH: list[tuple[str, str, str]] = [
    ("A", "op.send", "A: request parsed, addressed, composed (loop thread)"),
    ("A", "lane.run", "A: the loop thread publishes (basic_publish)"),
    ("A", "lane.ran", "broker: A's lane to B's intake, through B's consuming connection"),
    ("B", "io.msg", "B: intake (parse, dedup, record for the waiter) and commit"),
    ("B", "io.committed", "B: the I/O thread builds and writes the poll's answer"),
    ("B", "answer.sent", "B: the worker reads it, asks to confirm (hand-off: the poll's thread frees the connection)"),
    ("B", "op.confirm", "B: the worker's confirm (one store write, loop thread)"),
    ("B", "op.confirm.done", "worker: confirm answer read, reply request written"),
    ("B", "op.send", "B: reply parsed, addressed, composed (loop thread)"),
    ("B", "lane.run", "B: the loop thread publishes (basic_publish)"),
    ("B", "lane.ran", "broker: B's lane to A's intake, through A's consuming connection"),
    ("A", "io.msg", "A: intake and commit"),
    ("A", "io.committed", "A: the I/O thread builds and writes the send's answer"),
    ("A", "answer.sent", ""),
]


def _events(path: Path, host: str) -> list[tuple[int, str, str]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        stamp, _, label = line.partition(" ")
        out.append((int(stamp), host, label))
    return out


def _rounds(events: list[tuple[int, str, str]]) -> list[list[tuple[int, str, str]]]:
    """Each timed round trip: from A's ``send`` with a wait to its end."""
    rounds, current = [], None
    for event in sorted(events):
        if event[1:] == ("A", "op.send"):
            current = [event]
        elif current is not None:
            current.append(event)
            if event[1:] == ("A", "op.send.done"):
                rounds.append(current)
                current = None
    return rounds


def _walk(round_trip: list[tuple[int, str, str]]) -> list[int] | None:
    """The time of each :data:`PATH` event, each the first after the one before; None when
    the round does not follow the path (a heartbeat's lane call, a stray wakeup)."""
    times, index = [], 0
    for stamp, host, label in round_trip:
        if index < len(PATH) and (host, label) == PATH[index][:2]:
            times.append(stamp)
            index += 1
    return times if index == len(PATH) else None


def run(quick: bool = False) -> None:
    count = 100 if quick else 400
    with tempfile.TemporaryDirectory(prefix="u1hops") as tmp, Bench(quick) as bench:
        site = Path(tmp) / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(_HOOKS)
        marks = {name: Path(tmp) / f"{name}.marks" for name in ("a", "b")}
        samples = bridge_round_trips(
            bench, count, 20, env_for=lambda name: {"PYTHONPATH": str(site), "U1_HOPS_FILE": str(marks[name])}
        )
        events = _events(marks["a"], "A") + _events(marks["b"], "B")
        floor_dir = Path(tmp) / "floor"
        floor_dir.mkdir()
        floor = floor_round_trips(bench, count, 20, marks=floor_dir)
        floor_events = _events(floor_dir / "a.marks", "A") + _events(floor_dir / "b.marks", "B")
    timed = _rounds(events)[20:]  # after the warm-up
    walked = [t for t in (_walk(r) for r in timed) if t is not None]
    if not walked:
        sys.exit("no round trip followed the expected path; see the gateways' logs")
    print(f"U1 p50 {median(samples):.2f} ms over {len(samples)} round trips; {len(walked)} followed the path")
    stages = [median((t[i + 1] - t[i]) / 1e6 for t in walked) for i in range(len(PATH) - 1)]
    for ms, (_, _, stage) in zip(stages, PATH, strict=False):
        print(f"  {ms:6.3f} ms  {stage}")
    hand_offs = sum(ms for ms, (_, _, stage) in zip(stages, PATH, strict=False) if "hand-off" in stage)
    inside = median((t[-1] - t[0]) / 1e6 for t in walked)
    print(
        f"  sum of stage medians {sum(stages):.2f} ms; inside A's send --wait {inside:.2f} ms;"
        f" hand-offs {hand_offs:.2f} ms"
    )
    during, apart = _confirms_by_sync(timed)
    print(
        f"  B's confirm while B's I/O thread syncs the store: {len(during)} rounds, p50 {median(during):.3f} ms;"
        f" otherwise {len(apart)} rounds, p50 {median(apart):.3f} ms"
    )
    print(f"floor (single-threaded relays, same run): U1 p50 {median(floor):.2f} ms")
    for stage, ms in _floor_stages(floor_events).items():
        print(f"  {median(ms):6.3f} ms  {stage}")


def _floor_stages(events: list[tuple[int, str, str]]) -> dict[str, list[float]]:
    """The floor's stages (ms), to set beside the gateway's: each relay's request to its
    publish, its delivery to the answer written, and a publish to the other relay's delivery."""
    stages: dict[str, list[float]] = {
        "A: send request to publish call returned": [],
        "broker: publish to the other relay's delivery callback": [],
        "B: delivery to poll answer written": [],
        "B: reply request to publish call returned": [],
        "A: delivery to send answer written": [],
    }
    request: dict[str, int] = {}
    delivered: dict[str, int] = {}
    published: tuple[int, str] | None = None
    for stamp, host, label in sorted(events):
        if label in ("req.send", "req.reply"):
            request[host] = stamp
        elif label == "pub":
            if host in request:
                name = "A: send request" if host == "A" else "B: reply request"
                stages[f"{name} to publish call returned"].append((stamp - request.pop(host)) / 1e6)
            published = (stamp, host)
        elif label == "io.msg":
            delivered[host] = stamp
            if published is not None and published[1] != host:
                stages["broker: publish to the other relay's delivery callback"].append((stamp - published[0]) / 1e6)
                published = None
        elif label == "answered" and host in delivered:
            name = "B: delivery to poll answer" if host == "B" else "A: delivery to send answer"
            stages[f"{name} written"].append((stamp - delivered.pop(host)) / 1e6)
    return stages


def _confirms_by_sync(round_trips: list[list[tuple[int, str, str]]]) -> tuple[list[float], list[float]]:
    """B's confirm durations (ms), split by whether a ``Store.sync`` of B overlapped them."""
    during, apart = [], []
    for round_trip in round_trips:
        b = [(stamp, label) for stamp, host, label in round_trip if host == "B"]
        confirm = [stamp for stamp, label in b if label in ("op.confirm", "op.confirm.done")]
        syncs = [stamp for stamp, label in b if label in ("io.sync", "io.synced")]
        if len(confirm) < 2:
            continue
        start, end = confirm[0], confirm[1]
        overlaps = any(s0 < end and s1 > start for s0, s1 in zip(syncs[::2], syncs[1::2], strict=False))
        (during if overlaps else apart).append((end - start) / 1e6)
    return during, apart


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 round trips instead of 400")
    run(parser.parse_args().quick)
