"""Messaging bench (b) and (b2): one-shot ``bridge send`` against ``amqp-publish -p``, a pika
script and the floor of a Python gateway client, and a 1,000-line ``--lines`` send against a
loop of ``amqp-publish`` (method: docs/bench-methods.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:  # run_all and u1_floor load these by path
    sys.path.insert(0, str(BENCH))

from bench_hosts import BRIDGE, PYTHON, Bench  # noqa: E402

ONESHOT_QUEUE = "bench.oneshot"

_PIKA_PUBLISH = (
    "import pika, sys\n"
    "c = pika.BlockingConnection(pika.URLParameters(sys.argv[1]))\n"
    "ch = c.channel()\nch.confirm_delivery()\n"
    "ch.basic_publish('', sys.argv[2], b'hello', pika.BasicProperties(delivery_mode=2))\n"
    "c.close()\n"
)


_FLOOR = """\
import sys
import _socket
from bridgecli.wirejson import loads
sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
sock.settimeout(2.0)
sock.connect(sys.argv[1])
sock.settimeout(60.0)
sock.sendall(sys.argv[2].encode() + b"\\n")
answer = b""
while not answer.endswith(b"\\n"):
    chunk = sock.recv(65536)
    if not chunk:
        sys.exit("the gateway closed the connection")
    answer += chunk
result = loads(answer)
if not result.get("ok"):
    sys.exit(str(result.get("error")))
print(result["msgId"])
"""


def floor_script(root: Path, main_gid: str, sink_gid: str) -> tuple[Path, str]:
    """The floor client (see the module docstring) written under ``root``, and the op line it
    sends: the one ``bridge send SINK hello --from MAIN`` sends, from the same request model."""
    from bridgecli.requests import SendRequest

    request = SendRequest(command="send", contents=["hello"], sender=main_gid, target=sink_gid)
    line = json.dumps({"op": request.OP, **request.to_wire()}, separators=(",", ":"))
    shebang = Path(BRIDGE).read_text().splitlines()[0]  # the console script's own interpreter
    path = root / "floor-client"
    path.write_text(f"{shebang}\n{_FLOOR}")
    path.chmod(0o755)
    return path, line


def _timed(cmd: list[str], env: dict[str, str], stdin: bytes | None = None) -> float:
    began = time.perf_counter()
    proc = subprocess.run(
        cmd,
        env=env,
        input=stdin,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    elapsed = (time.perf_counter() - began) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} … exited {proc.returncode}: {proc.stderr.decode()[-400:]}")
    return elapsed


def _imports_pika(cmd: list[str], env: dict[str, str]) -> tuple[bool, float]:
    """Run ``cmd`` with ``-X importtime`` (PYTHONPROFILEIMPORTTIME); (pika imported?, total
    cumulative import ms of top-level modules)."""
    proc = subprocess.run(
        cmd, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    pika_seen, total_us = False, 0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:") :].rstrip("\n").split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2][1:]  # one space after the bar, then two per nesting level
        if name.strip().split(".")[0] == "pika":
            pika_seen = True
        if not name.startswith(" "):  # top level: its cumulative time covers its children
            total_us += int(parts[1])
    return pika_seen, total_us / 1000


def bench_oneshot(bench: Bench, runs: int, bulk_rounds: int, bulk_n: int) -> dict[str, Any]:
    """(b) and (b2) on one host with a running gateway; the target holds what it gets."""
    host = bench.host("send")
    main_gid = host.register("main", "hold", role="main")
    sink_gid = host.register("sink", "hold")
    host.start_gateway()
    conn = bench.pika()
    try:
        conn.channel().queue_declare(ONESHOT_QUEUE, durable=True)
    finally:
        conn.close()
    uri = bench.node.uri.rstrip("/")  # amqp-publish reads a trailing "/" as the empty vhost
    direct_env = {**host.env, "BRIDGE_GATEWAY_SOCKET": str(bench.root / "no-gateway.sock")}
    floor, line = floor_script(bench.root, main_gid, sink_gid)
    cases = {
        "gateway": ([BRIDGE, "send", sink_gid, "hello", "--from", main_gid], host.env),
        "floor": ([str(floor), str(host.socket), line], host.env),
        "direct": ([BRIDGE, "send", sink_gid, "hello", "--from", main_gid], direct_env),
        "amqp-publish": (["amqp-publish", "-u", uri, "-r", ONESHOT_QUEUE, "-p", "-b", "hello"], host.env),
        "pika": ([PYTHON, "-c", _PIKA_PUBLISH, uri, ONESHOT_QUEUE], host.env),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(3 + runs):  # interleaved, so load spikes hit every command alike
        for name, (cmd, env) in cases.items():
            ms = _timed(cmd, env)
            if i >= 3:
                samples[name].append(ms)
    gw_pika, gw_import_ms = _imports_pika(cases["gateway"][0], host.env)
    direct_pika, direct_import_ms = _imports_pika(cases["direct"][0], direct_env)

    lines = "".join(f"bulk line {i:04d}\n" for i in range(bulk_n)).encode()
    loop = f'for i in $(seq {bulk_n}); do amqp-publish -u "$1" -r {ONESHOT_QUEUE} -p -b "bulk line $i" || exit 1; done'
    bulk_bridge, bulk_amqp = [], []
    for _ in range(bulk_rounds):
        bulk_bridge.append(
            _timed([BRIDGE, "send", sink_gid, "-", "--lines", "--from", main_gid], host.env, stdin=lines)
        )
        bulk_amqp.append(_timed(["bash", "-c", loop, "loop", uri], host.env))
    host.stop_gateway()
    conn = bench.pika()
    try:
        conn.channel().queue_delete(ONESHOT_QUEUE)
    finally:
        conn.close()
    return {
        "samples": samples,
        "gateway_imports_pika": gw_pika,
        "gateway_import_ms": gw_import_ms,
        "direct_imports_pika": direct_pika,
        "direct_import_ms": direct_import_ms,
        "bulk_bridge": bulk_bridge,
        "bulk_amqp": bulk_amqp,
        "bulk_n": bulk_n,
        "runs": runs,
    }
