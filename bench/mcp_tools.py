"""``bridge mcp`` against the gateway's own socket API, on one host and a private broker.

What an MCP session adds on top of the operations it calls — the JSON-RPC hop over stdio,
schema validation, a fresh socket connection per call, framing of the result — measured
against the natural baseline: the same operation on the gateway's Unix socket, from a client
that also opens a fresh connection per call (what ``bridge mcp`` does). The MCP side is the
SDK's own stdio client driving the real ``bridge mcp`` subprocess.

(a) ``bridge_send`` (no wait) tool call vs op ``send`` on the socket; p50 over N calls.
(b) U1 round trip: ``bridge_send`` with ``wait`` vs op ``send`` with ``wait``; a responder
    thread long-polls the worker's hold (op ``poll``) and answers with op ``reply``.
(floor) a tool call the server answers itself (a schema refusal): the SDK's stdio JSON-RPC
    round trip, which (a) and (b) pay once per call.
(c) Push: from a message sent to the session to its ``notifications/claude/channel`` event
    at the client, vs from the same send to op ``held`` (long-poll) returning on the
    socket. Samples start from an empty, drained inbox (the watcher long-polling).

Run: ``.venv/bin/python bench/mcp_tools.py [--quick]``. Asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

if str(BENCH) not in sys.path:  # run_all loads the scripts by path
    sys.path.insert(0, str(BENCH))

from _common import median  # noqa: E402
from bench_hosts import BRIDGE, Bench  # noqa: E402


def _socket_call(host: Any, op: str, **params: Any) -> dict[str, Any]:
    from bridgecli.gateway.client import GatewayClient

    with GatewayClient.require(host.socket) as client:
        return client.call(op, timeout=60, **params)


def _responder(host: Any, worker: str, stop: threading.Event) -> None:
    """The worker: long-poll its hold and reply ``ok`` to each message."""
    while not stop.is_set():
        for message in _socket_call(host, "poll", gid=worker, wait=1.0)["messages"]:
            if message["content"].startswith("r"):  # round-trip requests only
                _socket_call(host, "send", command="reply", sender=worker, msg_id=message["msgId"], content="ok")


async def _mcp_side(host: Any, main: str, worker: str, n: int, push_n: int) -> dict[str, list[float]]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.client.extension import NotificationBinding
    from pydantic import BaseModel

    class Channel(BaseModel):
        content: str
        meta: dict[str, str] = {}

    arrived = anyio.Event()
    box = {"event": arrived}

    async def on_channel(params: Channel) -> None:
        if params.meta.get("kind") == "arrived":
            box["event"].set()

    out: dict[str, list[float]] = {"send": [], "rtt": [], "push": [], "floor": []}
    params = StdioServerParameters(command=BRIDGE, args=["mcp", "--label", main, "--no-browser"], env=host.env)
    with open(host.root / "mcp.log", "a") as log:
        async with stdio_client(params, errlog=log) as (read, write):
            async with ClientSession(
                read,
                write,
                notification_bindings=[
                    NotificationBinding(method="notifications/claude/channel", params_type=Channel, handler=on_channel)
                ],
            ) as session:
                await session.initialize()
                for i in range(n + 5):
                    began = time.perf_counter()
                    await session.call_tool("bridge_send", {})  # refused by the schema check, no gateway call
                    if i >= 5:
                        out["floor"].append((time.perf_counter() - began) * 1000)
                for i in range(n + 5):
                    began = time.perf_counter()
                    await session.call_tool("bridge_send", {"target": worker, "content": f"t{i}"})
                    if i >= 5:
                        out["send"].append((time.perf_counter() - began) * 1000)
                for i in range(n + 5):
                    began = time.perf_counter()
                    result = await session.call_tool("bridge_send", {"target": worker, "content": f"r{i}", "wait": 30})
                    assert not result.is_error, result
                    if i >= 5:
                        out["rtt"].append((time.perf_counter() - began) * 1000)
                for i in range(push_n):
                    await session.call_tool("bridge_poll", {})
                    await anyio.sleep(2.5)  # let the watcher see the empty inbox and long-poll again
                    box["event"] = anyio.Event()
                    began = time.perf_counter()
                    await anyio.to_thread.run_sync(
                        lambda i=i: _socket_call(
                            host, "send", command="send", sender=worker, target=main, content=f"p{i}"
                        )
                    )
                    with anyio.fail_after(30):
                        await box["event"].wait()
                    out["push"].append((time.perf_counter() - began) * 1000)
    return out


def _socket_side(host: Any, main: str, worker: str, n: int, push_n: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"send": [], "rtt": [], "push": []}
    for i in range(n + 5):
        began = time.perf_counter()
        _socket_call(host, "send", command="send", sender=main, target=worker, content=f"t{i}")
        if i >= 5:
            out["send"].append((time.perf_counter() - began) * 1000)
    for i in range(n + 5):
        began = time.perf_counter()
        _socket_call(host, "send", command="send", sender=main, target=worker, content=f"r{i}", wait=30)
        if i >= 5:
            out["rtt"].append((time.perf_counter() - began) * 1000)
    for i in range(push_n):
        _socket_call(host, "poll", gid=main)
        done = threading.Event()
        threading.Thread(
            target=lambda done=done: (_socket_call(host, "held", gid=main, wait=30), done.set()), daemon=True
        ).start()
        time.sleep(0.3)  # the long-poll is parked in the gateway
        began = time.perf_counter()
        _socket_call(host, "send", command="send", sender=worker, target=main, content=f"p{i}")
        done.wait(30)
        out["push"].append((time.perf_counter() - began) * 1000)
    _socket_call(host, "poll", gid=main)
    return out


def main(quick: bool = False) -> list[dict[str, Any]]:
    """Rows for bench/run_all.py (see the module docstring); also prints them."""
    import anyio

    n, push_n = (30, 5) if quick else (200, 12)
    with Bench(quick) as bench:
        host = bench.host("a")
        worker = host.register("worker", "hold")
        host.start_gateway()
        main_gid = host.register("main", "hold", role="main")
        stop = threading.Event()
        thread = threading.Thread(target=_responder, args=(host, worker, stop), daemon=True)
        thread.start()
        try:
            raw = _socket_side(host, main_gid, worker, n, push_n)
            mcp = anyio.run(_mcp_side, host, "main", worker, n, push_n)
        finally:
            stop.set()
            thread.join(5)
    rows = []
    for key, metric, base in (
        ("floor", "tool call answered without the gateway, p50", "op send on the socket"),
        ("send", "bridge_send tool call (no wait), p50", "op send on the socket"),
        ("rtt", "U1 round trip bridge_send wait, p50", "op send --wait on the socket"),
        ("push", "held message → channel notification, p50", "op held long-poll returns"),
    ):
        value, baseline = median(mcp[key]), median(raw.get(key) or raw["send"])
        rows.append(
            {
                "benchmark": "mcp_tools",
                "metric": metric,
                "value": round(value, 2),
                "unit": "ms",
                "baseline": f"{base} {baseline:.2f} ms",
                "ratio": round(value / baseline, 2),
                "note": f"{len(mcp[key])} samples, one host",
            }
        )
    for row in rows:
        print(f"{row['metric']:<45} {row['value']:>8} ms   vs {row['baseline']:<40} {row['ratio']}x")
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    main(parser.parse_args().quick)
