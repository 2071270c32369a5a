"""Per-action latency of the browser bridge against raw CDP, in one run on one Chromium.

Three ways to do the same action on the same page in the same headless Chromium:

* **raw CDP** (the baseline): websocket-client on the page's own DevTools socket, sending the
  one CDP call a hand-written script would (``Page.navigate`` + load event,
  ``Runtime.evaluate`` of a one-line expression, ``Page.captureScreenshot``), on the very tab
  that the bridge path of its row drives (the two executors have a tab each, one visible and
  one hidden, and loads differ between them, so a baseline taken on the other tab is none);
* **bridge → cdp executor**: a guest agent over WebSocket → the broker → bridgecli-cdp's
  executor → Chromium (the path of `bridge browser do` and of guest adapters);
* **bridge → extension**: the same, but the executor is the shipped MV3 extension.

Each row is the median over ``--runs`` iterations (half as many screenshots); ratio =
bridge / raw CDP on the same tab, all four columns interleaved. The bridge paths
do more per action on purpose (shared page helpers with error checks, a load wait that cannot
miss its event, two WebSocket hops), so the ratio is the price of routing + safety.

Run: ``.venv/bin/python bench/browser_actions.py [--runs N]``. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import http.server
import itertools
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PAGE = b"""<!doctype html><html><head><title>Bench</title></head><body><h1>Bench</h1>
<input id="name"><button id="go" onclick="document.getElementById('out').textContent='Hi '+
document.getElementById('name').value">Go</button><p id="out">-</p></body></html>"""

ACTIONS = ("navigate", "type", "click", "text", "snapshot", "screenshot")


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: object) -> None:
        pass


class RawCdp:
    """The baseline: one page socket, call() reads until its reply, events are kept."""

    def __init__(self, ws_url: str) -> None:
        import websocket

        self.ws = websocket.create_connection(ws_url, suppress_origin=True, timeout=30)
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        self.call("Page.enable")
        self.call("Page.setLifecycleEventsEnabled", enabled=True)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                return msg.get("result", {})
            self.events.append(msg)

    def wait_load(self, loader_id: str) -> None:
        """Wait for the load of *this* navigation (the tab is shared with the cdp executor, so
        a bare Page.loadEventFired could be another client's)."""

        def match(event: dict[str, Any]) -> bool:
            params = event.get("params", {})
            return (
                event.get("method") == "Page.lifecycleEvent"
                and params.get("name") == "load"
                and params.get("loaderId") == loader_id
            )

        for i, event in enumerate(self.events):  # those that came before Page.navigate's reply
            if match(event):
                del self.events[: i + 1]
                return
        while not match(json.loads(self.ws.recv())):
            pass

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)

    def do(self, action: str, url: str) -> None:
        if action == "navigate":
            self.events.clear()  # the other client's events on this tab: none is this load
            self.wait_load(self.call("Page.navigate", url=url)["loaderId"])
        elif action == "type":
            self.evaluate("document.getElementById('name').value='Ada'")
        elif action == "click":
            self.evaluate("document.getElementById('go').click()")
        elif action == "text":
            self.evaluate("document.body.innerText")
        elif action == "snapshot":
            self.evaluate("document.body.innerText")  # no raw equivalent: the page text
        elif action == "screenshot":
            self.call("Page.captureScreenshot", format="png")


def bridge_params(action: str, url: str) -> dict[str, Any]:
    return {
        "navigate": {"url": url},
        "type": {"selector": "#name", "text": "Ada"},
        "click": {"selector": "#go"},
        "text": {},
        "snapshot": {},
        "screenshot": {},
    }[action]


def medians_ms(
    fns: list[Callable[[], Any]], runs: int, *, interleave: bool, before: Callable[[int], Any] = lambda i: None
) -> list[float]:
    """Median wall time of each function. Interleaved (raw, bridge, raw, bridge, …) so that a
    load spike on this shared machine hits every column alike; screenshots run in blocks
    instead (``before(i)`` runs ahead of block i), because each path must keep its own tab in
    front while it captures."""
    samples: list[list[float]] = [[] for _ in fns]

    def timed(i: int) -> None:
        start = time.perf_counter()
        fns[i]()
        samples[i].append((time.perf_counter() - start) * 1000)

    if interleave:
        for fn in fns:
            fn()  # warm-up
        for _ in range(runs):
            for i in range(len(fns)):
                timed(i)
    else:
        for i, fn in enumerate(fns):
            before(i)
            fn()  # warm-up
            for _ in range(runs):
                timed(i)
    return [statistics.median(column) for column in samples]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(predicate: Callable[[], Any], timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for the browser executors to connect")


def main(runs: int = 20) -> list[dict[str, Any]]:
    """Measure every action three ways; return rows in bench/run_all.py's format."""
    root = Path(tempfile.mkdtemp(prefix="bench-browser-"))
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        os.environ[f"XDG_{name}_HOME"] = str(root / name.lower())
    from bridgecli.browser.connect import BrowserBridge
    from bridgecli.cli.browser_exec import extension_dir
    from bridgecli.interfaces import ExecutorOptions
    from bridgecli_cdp.chromium import Chromium
    from bridgecli_cdp.target import CdpTarget

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    server.handle_error = lambda *args: None  # Chromium aborting a favicon fetch is not news
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/page.html"
    port, token = _free_port(), "bench-token"
    host = BrowserBridge(port, token, label="bench-host").start()
    ext = root / "extension"
    shutil.copytree(extension_dir(), ext)
    (ext / "config.json").write_text(json.dumps({"port": port, "token": token, "label": "ext"}))
    browser = Chromium(
        extra_args=[
            f"--load-extension={ext}",
            f"--disable-extensions-except={ext}",
            "--disable-features=DisableLoadExtensionCommandLineSwitch",
        ]
    ).start()
    stop = threading.Event()
    options = ExecutorOptions(url=f"ws://127.0.0.1:{port}/", token=token, label="cdp", executor_id=None)
    executor = threading.Thread(
        target=CdpTarget().attach, args=(options,), kwargs={"endpoint": browser.endpoint, "stop": stop}, daemon=True
    )
    executor.start()
    agent = None
    try:
        _wait(lambda: len(host.send("targets")["targets"]) == 2)
        agent = BrowserBridge(port, token, label="bench-agent", allow_host=False, failover=False).start()
        paths = (("on-cdp", "cdp", "bridge → cdp executor"), ("on-ext", "ext", "bridge → extension"))
        for group, target, _ in paths:  # a URL of its own, to find the tab's page socket by
            agent.send("open", group, {"url": f"{url}?{group}"}, target=target)
        listing = json.load(urllib.request.urlopen(f"{browser.endpoint}/json/list"))
        # Each baseline drives the very tab its bridge path drives, over that page's own socket.
        raws = [
            RawCdp(next(t["webSocketDebuggerUrl"] for t in listing if t["url"] == f"{url}?{group}"))
            for group, _, _ in paths
        ]

        rows = []
        for action in ACTIONS:
            n = max(5, runs // 2) if action == "screenshot" else runs
            fns: list[Callable[[], Any]] = []
            for raw, (group, _, _) in zip(raws, paths, strict=True):
                fns += [
                    lambda r=raw, a=action: r.do(a, url),
                    lambda g=group, a=action: agent.send(a, g, bridge_params(a, url)),
                ]
            # a background tab waits for a frame to paint: each raw block brings its tab forward
            medians = medians_ms(
                fns,
                n,
                interleave=action != "screenshot",
                before=lambda i: i % 2 == 0 and raws[i // 2].call("Page.bringToFront"),
            )
            for (group, _, label), base, value in zip(paths, medians[::2], medians[1::2], strict=True):
                note = f"median of {n}"
                if action == "screenshot" and group == "on-ext":
                    note += "; Chrome allows 2 captureVisibleTab calls/s per extension"
                rows.append(
                    {
                        "benchmark": "browser_actions",
                        "metric": f"{action} via {label}",
                        "value": round(value, 2),
                        "unit": "ms",
                        "baseline": f"raw CDP, same tab {base:.2f} ms",
                        "ratio": round(value / base, 2),
                        "note": note,
                    }
                )
        for raw in raws:
            raw.ws.close()
        return rows
    finally:
        if agent is not None:
            agent.close()
        stop.set()
        executor.join(10)
        host.close()
        browser.stop()
        server.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def _print(rows: list[dict[str, Any]]) -> None:
    width = max(len(r["metric"]) for r in rows)
    print(f"{'action':<{width}}  {'median':>9}  {'raw CDP':>9}  ratio")
    for row in rows:
        base = row["baseline"].split()[-2]
        print(f"{row['metric']:<{width}}  {row['value']:>6.2f} ms  {float(base):>6.2f} ms  {row['ratio']:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="iterations per action (default 20)")
    _print(main(parser.parse_args().runs))
