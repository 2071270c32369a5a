"""Benchmark: confirmed injections per second into one tmux pane and into the herdr fake.

Baselines, in the same run against the same pane: ``raw send-keys`` (one tmux process per
message, no framing or confirmation); ``raw send-keys + wait`` (then poll ``capture-pane``
until the text shows); ``raw send_input`` (one herdr ``pane.send_input`` per message); and,
for a 5-line message, ``raw header + paste + Enter + wait`` (the backend's old one-call
sequence, before it waited for each step to show).

Run: ``.venv/bin/python bench/tmux_inject.py [-n 200]``. Timing is never asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SENDER = "0b5e0000-aaaa-4bbb-8ccc-dddddddddddd"


def _rate(n: int, fn: Callable[[int], None]) -> float:
    started = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - started)


def _envelope(i: int, lines: int = 1) -> Any:
    from bridgecli.envelope import Envelope

    content = "\n".join(f"line {k} of message {i}" for k in range(lines))
    return Envelope(kind="SEND", sender=SENDER, recipient=SENDER, content=content, sender_label="bench")


def _entity(deliver: str) -> Any:
    from bridgecli.interfaces import Entity

    return Entity(
        gid=str(uuid.uuid4()), label="bench", role="agent", deliver=deliver, host="bench", created=time.time()
    )


def bench_tmux(n: int, tmp: Path) -> list[dict[str, Any]]:
    from bridgecli_tmux.backend import TmuxBackend, TmuxSettings
    from bridgecli_tmux.client import Tmux

    sock = str(tmp / "s")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    # `cat` with the tty's echo: what is typed shows up, nothing is executed
    subprocess.run(
        [
            "tmux",
            "-S",
            sock,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "b",
            "-x",
            "200",
            "-y",
            "50",
            "cat >/dev/null",
        ],
        check=True,
        env=env,
    )
    try:
        tmux = Tmux(sock)
        pane = tmux.pane("b:").pane_id

        def raw(i: int) -> None:
            tmux.run("send-keys", "-t", pane, "-l", f"raw message {i} x", ";", "send-keys", "-t", pane, "Enter")

        def raw_wait(i: int) -> None:
            text = f"rawwait {uuid.uuid4().hex[:8]} x"
            tmux.run("send-keys", "-t", pane, "-l", text, ";", "send-keys", "-t", pane, "Enter")
            while text not in tmux.capture(pane, 5):
                time.sleep(0.002)

        backend = TmuxBackend(TmuxSettings(socket=sock))  # default settings: control mode on
        entity = _entity(f"tmux:{pane}")

        def bridge(i: int) -> None:
            backend.deliver(entity, _envelope(i))

        body = "".join(f"\nline {k} of the message" for k in range(5)).encode()

        def raw_paste(i: int) -> None:
            header = f"[rawpaste {uuid.uuid4().hex[:8]}] x"
            tmux.run(
                *("send-keys", "-t", pane, "-l", header, ";", "load-buffer", "-b", "bb", "-", ";"),
                *("paste-buffer", "-p", "-d", "-b", "bb", "-t", pane, ";", "send-keys", "-t", pane, "Enter"),
                input=body,
            )
            while header not in tmux.capture(pane, 12):
                time.sleep(0.002)

        def bridge_lines(i: int) -> None:
            backend.deliver(entity, _envelope(i, lines=5))

        raw(0), bridge(0), raw_wait(0), raw_paste(0), bridge_lines(0)  # warm up
        raw_rate = _rate(n, raw)
        wait_rate = _rate(n, raw_wait)
        bridge_rate = _rate(n, bridge)
        paste_rate = _rate(n, raw_paste)
        lines_rate = _rate(n, bridge_lines)
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
    return [
        {"target": "tmux", "path": "raw send-keys (unconfirmed)", "per_s": raw_rate, "ratio": 1.0},
        {"target": "tmux", "path": "raw send-keys + wait visible", "per_s": wait_rate, "ratio": wait_rate / raw_rate},
        {
            "target": "tmux",
            "path": "bridge tmux backend (confirmed)",
            "per_s": bridge_rate,
            "ratio": bridge_rate / raw_rate,
        },
        {"target": "tmux 5-line", "path": "raw header + paste + Enter + wait", "per_s": paste_rate, "ratio": 1.0},
        {
            "target": "tmux 5-line",
            "path": "bridge tmux backend (confirmed)",
            "per_s": lines_rate,
            "ratio": lines_rate / paste_rate,
        },
    ]


def bench_herdr(n: int, tmp: Path) -> list[dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "plugins" / "bridgecli-herdr" / "tests"))
    from fake_herdr import FakeHerdr  # the fake the plugin's tests run against

    from bridgecli_herdr.backend import HerdrBackend, HerdrSettings
    from bridgecli_herdr.client import HerdrClient

    fake = FakeHerdr(tmp / "herdr.sock").start()
    try:
        pane = fake.add_pane(agent="claude")
        client = HerdrClient(fake.path)
        client.ping()

        def raw(i: int) -> None:
            client.request("pane.send_input", {"pane_id": pane.pane_id, "text": f"raw {i}", "keys": ["Enter"]})

        backend = HerdrBackend(HerdrSettings(), HerdrClient(fake.path))
        entity = _entity(f"herdr:{pane.pane_id}")

        def bridge(i: int) -> None:
            backend.deliver(entity, _envelope(i))

        raw(0), bridge(0)
        raw_rate = _rate(n, raw)
        bridge_rate = _rate(n, bridge)
    finally:
        fake.stop()
    return [
        {"target": "herdr fake", "path": "raw pane.send_input (unconfirmed)", "per_s": raw_rate, "ratio": 1.0},
        {
            "target": "herdr fake",
            "path": "bridge herdr backend (confirmed)",
            "per_s": bridge_rate,
            "ratio": bridge_rate / raw_rate,
        },
    ]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run both benchmarks, print a table, return its rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="messages per measurement")
    args = parser.parse_args([] if argv is None else argv)  # run_all calls main() with no arguments
    tmp = Path(tempfile.mkdtemp(prefix="bb", dir="/tmp"))
    try:
        rows = []
        if shutil.which("tmux"):
            rows += bench_tmux(args.n, tmp)
        rows += bench_herdr(args.n, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'target':<11} {'path':<36} {'msgs/s':>9} {'× baseline':>11}")
    for row in rows:
        print(f"{row['target']:<11} {row['path']:<36} {row['per_s']:>9.0f} {row['ratio']:>10.2f}×")
    return _contract_rows(rows, args.n)


def _contract_rows(rows: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The bench/run_all.py row shape: each measured path against its target's first (raw) row."""
    out = []
    for row in rows:
        base = next(r for r in rows if r["target"] == row["target"])
        if row is base:
            continue
        out.append(
            {
                "benchmark": "tmux_inject",
                "metric": f"{row['target']}: {row['path']}",
                "value": round(row["per_s"], 1),
                "unit": "msg/s",
                "baseline": f"{base['path']} {base['per_s']:.0f} msg/s",
                "ratio": round(row["ratio"], 2),
                "note": f"{n} messages",
            }
        )
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
