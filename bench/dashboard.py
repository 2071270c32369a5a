"""``bridge dashboard`` under 1,000 msg/s: its CPU (% of a core, against itself idle) and the
page's lag (draw time minus send time), for bench/run_all.py; the method is in
docs/benchmarks.md ("Dashboard under load"). Asserts nothing: benchmarks report, tests judge.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
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
BRIDGE = str(Path(sys.executable).with_name("bridge"))
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from bridgecli.localbroker import LocalNode  # noqa: E402  (no pika at import)

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _cpu_percent(pid: int, seconds: float) -> float:
    start_cpu, start = _cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return 100 * (_cpu_seconds(pid) - start_cpu) / (time.monotonic() - start)


class Publisher:
    """Valid envelopes onto bridge.msg at ``rate`` per second until stopped."""

    def __init__(self, uri: str, rate: int) -> None:
        self.uri, self.rate = uri, rate
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Publisher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        import pika

        connection = pika.BlockingConnection(pika.URLParameters(self.uri))
        channel = connection.channel()
        channel.exchange_declare("bridge.msg", "topic", durable=True)
        sender, recipients = str(uuid.uuid4()), [str(uuid.uuid4()) for _ in range(8)]
        slice_s = 0.02
        per_slice = self.rate * slice_s
        started, due = time.monotonic(), 0.0
        while not self._stop.is_set():
            due += per_slice
            while self.sent < int(due):
                to = recipients[self.sent % len(recipients)]
                body = json.dumps(
                    {
                        "v": 1,
                        "msgId": str(uuid.uuid4()),
                        "kind": "SEND",
                        "from": sender,
                        "to": to,
                        "ts": time.time(),
                        "content": f"bench message {self.sent}",
                        "fromLabel": "bench",
                        "fromHost": "bench-host",
                    }
                ).encode()
                channel.basic_publish("bridge.msg", to, body)
                self.sent += 1
            pause = started + (due / self.rate) - time.monotonic()
            connection.sleep(max(0.0, pause))
        connection.close()


def measure(rate: int = 1000, seconds: float = 20.0) -> dict[str, Any]:
    from bridgecli_cdp.cdp import Cdp, browser_ws_url
    from bridgecli_cdp.chromium import Chromium

    root = Path(tempfile.mkdtemp(prefix="bdash", dir="/tmp"))
    node = LocalNode(root / "node")
    node.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRIDGE_", "XDG_"))}
    for name in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
        path = root / name.lower()
        path.mkdir(mode=0o700)
        env[f"XDG_{name}_{'DIR' if name == 'RUNTIME' else 'HOME'}"] = str(path)
    env.update({"BRIDGE_HOST_ID": "bench", "BRIDGE_BROKER_URI": node.uri})
    board = subprocess.Popen(
        [BRIDGE, "dashboard", "--no-open", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    browser = publisher = cdp = None
    try:
        url = json.loads(board.stdout.readline())["url"]
        browser = Chromium().start(timeout=60)
        cdp = Cdp(browser_ws_url(browser.endpoint))
        target = cdp.call("Target.createTarget", {"url": url})["targetId"]
        session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

        def js(expression: str) -> Any:
            return cdp.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session)[
                "result"
            ].get("value")

        deadline = time.monotonic() + 30
        while not js("window.bridgeDashboard && window.bridgeDashboard.updates > 2"):
            if time.monotonic() > deadline:
                raise RuntimeError("the page never got live")
            time.sleep(0.2)
        idle = _cpu_percent(board.pid, 5.0)
        publisher = Publisher(node.uri, rate).start()
        time.sleep(3.0)  # warm-up: the first batches carry the backlog of the start
        js("window.bridgeDashboard.lag.max = 0")
        samples: list[float] = []
        sent_before, start_cpu, start = publisher.sent, _cpu_seconds(board.pid), time.monotonic()
        while time.monotonic() - start < seconds:
            time.sleep(0.5)
            last = js("window.bridgeDashboard.lag.last")
            if last is not None:
                samples.append(float(last))
        elapsed = time.monotonic() - start
        busy = 100 * (_cpu_seconds(board.pid) - start_cpu) / elapsed
        achieved = (publisher.sent - sent_before) / elapsed
        return {
            "idle_cpu": idle,
            "cpu": busy,
            "rate": achieved,
            "lag_median": statistics.median(samples),
            "lag_max": float(js("window.bridgeDashboard.lag.max")),
            "samples": len(samples),
            "skipped": js("window.bridgeDashboard.skipped"),
        }
    finally:
        if publisher is not None:
            publisher.stop()
        if cdp is not None:
            cdp.close()
        if browser is not None:
            browser.stop()
        if board.poll() is None:
            os.killpg(board.pid, signal.SIGINT)
            try:
                board.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(board.pid, signal.SIGKILL)
        node.stop()
        shutil.rmtree(root, ignore_errors=True)


def main(rate: int = 1000, seconds: float = 20.0) -> list[dict[str, Any]]:
    m = measure(rate, seconds)
    note = f"{m['rate']:.0f} msg/s achieved over {seconds:g} s"
    return [
        {
            "benchmark": "dashboard",
            "metric": f"dashboard CPU at {rate} msg/s",
            "value": round(m["cpu"], 1),
            "unit": "% of a core",
            "baseline": f"idle {m['idle_cpu']:.1f} %; goal < 10 %",
            "ratio": round(m["cpu"] / 10, 2),
            "note": note,
        },
        {
            "benchmark": "dashboard",
            "metric": f"page lag at {rate} msg/s (median)",
            "value": round(m["lag_median"], 2),
            "unit": "s",
            "baseline": "goal <= 1 s",
            "ratio": round(m["lag_median"] / 1.0, 2),
            "note": f"{m['samples']} samples; {m['skipped']} rows counted, not drawn",
        },
        {
            "benchmark": "dashboard",
            "metric": f"page lag at {rate} msg/s (max)",
            "value": round(m["lag_max"], 2),
            "unit": "s",
            "baseline": "goal <= 1 s",
            "ratio": round(m["lag_max"] / 1.0, 2),
            "note": note,
        },
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    for row in main(args.rate, args.seconds):
        print(f"{row['metric']:40} {row['value']:>8} {row['unit']:12} ({row['baseline']}; {row['note']})")
