"""How soon ``bridge mcp`` answers a client that launches it, against a minimal SDK server.

A client spawns ``/abs/bridge mcp`` (as ``bridge install`` writes it) on stdio; timed from the
spawn to the answer of ``initialize`` and, after ``notifications/initialized``, of
``tools/list``. Baseline: a one-tool server on the same SDK's low-level ``Server``, run by
the same interpreter. Raw JSON-RPC lines, not the SDK client, so the bench adds no work of
its own. Both interleaved, N sessions each, p50 and p95; without a gateway, then with
one running on a private broker. Goal: p50 <= 1.5x.
Run: ``.venv/bin/python bench/mcp_handshake.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:  # run_all loads the scripts by path
    sys.path.insert(0, str(BENCH))

from _common import median, pct  # noqa: E402
from bench_hosts import BRIDGE, PYTHON, Bench, clean_env  # noqa: E402

GOAL = 1.5
PROTOCOL = "2025-11-25"  # the newest handshake-era version: what today's clients send
MINIMAL_SERVER = '''\
"""The least MCP server on the SDK: one tool, low-level Server, stdio."""
import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(name="echo", description="Echo the text.",
                  input_schema={"type": "object", "properties": {"text": {"type": "string"}}})


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(text=str((params.arguments or {}).get("text")))])


async def serve():
    server = Server("minimal", version="0", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(serve)
'''
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


def _answer(proc: subprocess.Popen, request_id: int) -> dict[str, Any]:
    """The response to ``request_id``; notifications before it are skipped."""
    assert proc.stdout is not None
    while True:
        raw = proc.stdout.readline()
        if not raw:
            raise RuntimeError(f"the server closed stdout before answering request {request_id}")
        message = json.loads(raw)
        if message.get("id") == request_id:
            if "result" not in message:
                raise RuntimeError(f"request {request_id} failed: {message}")
            return message["result"]


def session(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """One client session: ms from spawn to ``initialize`` answered, to ``tools/list``
    answered, and how many tools it listed. The server is ended (stdin closed) and reaped
    before this returns, so no session overlaps the next one."""
    began = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    watchdog = threading.Timer(120, proc.kill)  # a hung server fails the run, never stalls it
    watchdog.start()
    assert proc.stdin is not None
    try:
        proc.stdin.write(_line(INITIALIZE))
        proc.stdin.flush()
        init = _answer(proc, 1)
        init_ms = (time.perf_counter() - began) * 1000
        if init.get("protocolVersion") != PROTOCOL:
            raise RuntimeError(f"{cmd[-1]} answered protocol {init.get('protocolVersion')}")
        proc.stdin.write(_line(INITIALIZED) + _line(TOOLS_LIST))
        proc.stdin.flush()
        tools = _answer(proc, 2)["tools"]
        list_ms = (time.perf_counter() - began) * 1000
    finally:
        watchdog.cancel()
        proc.stdin.close()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return init_ms, list_ms, len(tools)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def interleaved(
    cases: dict[str, list[str]], env: dict[str, str], cwd: Path, runs: int, warmup: int = 2
) -> dict[str, dict[str, Any]]:
    """``runs`` sessions of each case in interleaved rounds (the order flips every round, so
    neither side always follows the other), after ``warmup`` uncounted rounds."""
    out: dict[str, dict[str, Any]] = {name: {"init": [], "list": [], "tools": 0} for name in cases}
    names = list(cases)
    for i in range(warmup + runs):
        for name in names if i % 2 == 0 else names[::-1]:
            init_ms, list_ms, tools = session(cases[name], env, cwd)
            out[name]["tools"] = tools
            if i >= warmup:
                out[name]["init"].append(init_ms)
                out[name]["list"].append(list_ms)
    return out


def _rows(scenario: str, samples: dict[str, dict[str, Any]], runs: int, load: str) -> list[dict[str, Any]]:
    rows = []
    bridge, floor = samples["bridge"], samples["minimal"]
    for key, what in (("init", "initialize answered"), ("list", "tools/list answered")):
        p50, base50 = median(bridge[key]), median(floor[key])
        p95, base95 = pct(bridge[key], 0.95), pct(floor[key], 0.95)
        ratio = round(p50 / base50, 2)
        rows.append(
            {
                "benchmark": "mcp_handshake",
                "metric": f"bridge mcp spawn → {what}, {scenario}, p50",
                "value": round(p50, 1),
                "unit": "ms",
                "baseline": f"minimal low-level SDK server ({floor['tools']} tool) p50 {base50:.1f} ms",
                "ratio": ratio,
                "note": f"goal <={GOAL}x: {'met' if ratio <= GOAL else 'MISSED'}; bridge's own {p50 - base50:+.0f} ms; "
                f"p95 {p95:.1f} vs {base95:.1f} ms "
                f"({p95 / base95:.2f}x); {bridge['tools']} tools; {runs} sessions each, interleaved; "
                f"raw JSON-RPC lines over stdio; {load}",
            }
        )
    return rows


def main(runs: int = 20) -> list[dict[str, Any]]:
    """Rows for bench/run_all.py: initialize and tools/list, without and with a gateway."""
    root = Path(tempfile.mkdtemp(prefix="bmh", dir="/tmp"))
    try:
        server = root / "minimal_server.py"
        server.write_text(MINIMAL_SERVER)
        cases = {"minimal": [PYTHON, str(server)], "bridge": [BRIDGE, "mcp"]}
        port = str(_free_port())  # the browser election's port: not a broker someone else runs
        env = {k: v for k, v in clean_env().items() if not k.startswith(("BRIDGE_", "XDG_", "OCB_"))}
        for part in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
            path = root / "alone" / part.lower()
            path.mkdir(mode=0o700, parents=True)
            env[f"XDG_{part}_{'DIR' if part == 'RUNTIME' else 'HOME'}"] = str(path)
        env["BRIDGE_BROWSER_PORT"] = port
        load = os.getloadavg()[0]
        alone = interleaved(cases, env, root, runs)
        rows = _rows("no gateway", alone, runs, f"load {load:.2f} → {os.getloadavg()[0]:.2f}")
        with Bench() as bench:
            host = bench.host("a")
            host.start_gateway()
            load = os.getloadavg()[0]
            served = interleaved(cases, {**host.env, "BRIDGE_BROWSER_PORT": port}, host.root, runs)
            rows += _rows("gateway running", served, runs, f"load {load:.2f} → {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        print(f"{row['metric']:<62} {row['value']:>8} ms {row['ratio']:>6}x  vs {row['baseline']}; {row['note']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="sessions per side and scenario (default 20)")
    print_table(main(parser.parse_args().runs))
