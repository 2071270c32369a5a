"""What a browser tool call through ``bridge mcp`` costs over a direct broker connection.

Both paths drive the same headless Chromium (bridgecli-cdp's executor) through the same
broker, hosted by this script; each owns its own group on the same page:

* **MCP** (measured): the SDK's stdio client → the real ``bridge mcp --no-messaging``
  subprocess, a *guest* of the broker → broker → executor. This pays the JSON-RPC hop over
  stdio, schema validation, a worker thread per call and the result text;
* **direct** (the natural baseline): a guest agent (``BrowserBridge``, the path of `bridge
  browser do` without its process start) → broker → executor.

Calls are interleaved (MCP, direct, MCP, …) so a load spike on the shared machine hits both
columns alike; each row is a median. ``targets`` is answered by the broker itself, so its row
is the pure adapter overhead; the others include the browser's work.

Run: ``.venv/bin/python bench/mcp_browser.py [--runs N]``. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import http.server
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PAGE = b"""<!doctype html><html><head><title>Bench</title></head><body><h1>Bench</h1>
<input id="name"><button id="go" onclick="document.getElementById('out').textContent='Hi '+
document.getElementById('name').value">Go</button><p id="out">-</p></body></html>"""

#: (tool / action, params) measured on each path
CALLS = (
    ("targets", {}),
    ("text", {"selector": "#out"}),
    ("type", {"selector": "#name", "text": "Ada"}),
    ("click", {"selector": "#go"}),
    ("snapshot", {}),
)


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: object) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(runs: int = 30) -> list[dict[str, Any]]:
    """Measure each call both ways; return rows in bench/run_all.py's format."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from bridgecli.browser.connect import BrowserBridge
    from bridgecli.interfaces import ExecutorOptions
    from bridgecli_cdp.chromium import Chromium
    from bridgecli_cdp.target import CdpTarget

    root = Path(tempfile.mkdtemp(prefix="bench-mcpb-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRIDGE_", "XDG_", "OCB_"))}
    for name in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
        path = root / name.lower()
        path.mkdir(mode=0o700, parents=True)
        key = f"XDG_{name}_{'DIR' if name == 'RUNTIME' else 'HOME'}"
        env[key] = os.environ[key] = str(path)
    port, token = _free_port(), "bench-token"
    env.update(BRIDGE_BROWSER_PORT=str(port), BRIDGE_BROWSER_TOKEN=token, BRIDGE_MCP_MESSAGING="0")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    server.handle_error = lambda *args: None
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/page.html"
    host = BrowserBridge(port, token, label="bench-host").start()
    browser = Chromium().start()
    stop = threading.Event()
    options = ExecutorOptions(url=f"ws://127.0.0.1:{port}/", token=token, label="cdp", executor_id=None)
    executor = threading.Thread(
        target=CdpTarget().attach, args=(options,), kwargs={"endpoint": browser.endpoint, "stop": stop}, daemon=True
    )
    executor.start()
    agent = BrowserBridge(port, token, label="bench-direct", allow_host=False, failover=False).start()
    bridge_bin = str(Path(sys.executable).with_name("bridge"))

    async def measure() -> list[dict[str, Any]]:
        params = StdioServerParameters(command=bridge_bin, args=["mcp", "--label", "bench"], env=env)
        with open(root / "mcp.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    deadline = time.monotonic() + 30
                    while True:  # the session joins in the background; the executor connects
                        result = await session.call_tool("browser_targets", {})
                        if not result.is_error and result.structured_content["targets"]:
                            break
                        if time.monotonic() > deadline:
                            raise RuntimeError("bridge mcp never saw the executor")
                        await anyio.sleep(0.1)
                    opened = await session.call_tool("browser_open", {"group": "on-mcp", "url": url})
                    assert not opened.is_error, opened
                    agent.send("open", "on-direct", {"url": url})
                    rows = []
                    for action, args in CALLS:
                        group = {} if action == "targets" else {"group": "on-mcp"}
                        samples: dict[str, list[float]] = {"mcp": [], "direct": []}
                        for i in range(runs + 1):  # the first round warms both paths up
                            start = time.perf_counter()
                            result = await session.call_tool(f"browser_{action}", {**group, **args})
                            mcp_ms = (time.perf_counter() - start) * 1000
                            assert not result.is_error, result
                            start = time.perf_counter()
                            agent.send(action, None if action == "targets" else "on-direct", args)
                            direct_ms = (time.perf_counter() - start) * 1000
                            if i:
                                samples["mcp"].append(mcp_ms)
                                samples["direct"].append(direct_ms)
                        value, base = (statistics.median(samples[k]) for k in ("mcp", "direct"))
                        rows.append(
                            {
                                "benchmark": "mcp_browser",
                                "metric": f"browser_{action} via bridge mcp",
                                "value": round(value, 2),
                                "unit": "ms",
                                "baseline": f"direct guest agent {base:.2f} ms",
                                "ratio": round(value / base, 2),
                                "note": f"median of {runs}",
                            }
                        )
                    return rows

    try:
        return anyio.run(measure)
    finally:
        agent.close()
        stop.set()
        executor.join(10)
        host.close()
        browser.stop()
        server.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def _print(rows: list[dict[str, Any]]) -> None:
    width = max(len(r["metric"]) for r in rows)
    print(f"{'call':<{width}}  {'median':>9}  {'direct':>9}  ratio")
    for row in rows:
        base = row["baseline"].split()[3]
        print(f"{row['metric']:<{width}}  {row['value']:>6.2f} ms  {float(base):>6.2f} ms  {row['ratio']:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="calls per row and path (default 30)")
    _print(main(parser.parse_args().runs))
