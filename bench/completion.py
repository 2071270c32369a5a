"""Latency of a TAB (``bridge`` answering click's completion protocol) against ``python -c
pass``, in interleaved rounds; goal <= 3x in every case. Cases and method:
docs/bench-methods.md. Asserts nothing about time.
Run: ``.venv/bin/python bench/completion.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from cli_startup import interleaved_ms  # the start-up benchmark's timing loop (bench/ is on sys.path)

VENV_BIN = Path(sys.executable).parent
PYTHON = str(VENV_BIN / "python")
BRIDGE = str(VENV_BIN / "bridge")
HEAVY = ("pika", "websockets", "websocket", "mcp", "click")
GOAL = 3  # every case <= 3x the bare interpreter
ROOT = Path(__file__).resolve().parent.parent


def make_env(root: Path) -> dict[str, str]:
    """An isolated host: its own XDG dirs, no BRIDGE_* from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRIDGE_", "XDG_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # time with bytecode caches, as users run it
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        (root / name.lower()).mkdir(parents=True, exist_ok=True)
        env[f"XDG_{name}_HOME"] = str(root / name.lower())
    (root / "run").mkdir(mode=0o700, exist_ok=True)
    env["XDG_RUNTIME_DIR"] = str(root / "run")
    return env


def tab_env(env: dict[str, str], line: str) -> dict[str, str]:
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    return {**env, "_BRIDGE_COMPLETE": "bash_complete", "COMP_WORDS": line, "COMP_CWORD": str(cword)}


def offered(env: dict[str, str]) -> int:
    """How many candidates the TAB produced (so a broken case is visible in the table)."""
    proc = subprocess.run([BRIDGE], env=env, capture_output=True, text=True, timeout=30)
    return len([line for line in proc.stdout.splitlines() if line.strip()])


def heavy_imports(env: dict[str, str]) -> list[str]:
    # through the console script's own entry point, so its click-free fast path counts
    # with the console script's sys.path, so the CLI snapshot its timed runs cached is the one used
    probe = (
        f"import sys\nsys.path[0] = {str(VENV_BIN)!r}\nsys.argv = ['bridge']\n"
        "from bridgecli.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    proc = subprocess.run([PYTHON, "-c", probe], env=env, capture_output=True, text=True, timeout=30)
    last = proc.stderr.strip().splitlines()[-1:] or [""]
    return [m for m in last[0].split(",") if m]


def fill_roster_cache(env: dict[str, str], hosts: int = 10, per_host: int = 20) -> None:
    entries = [
        {
            "gid": str(uuid.uuid4()),
            "label": f"agent-{h}-{i}",
            "host": f"host-{h}",
            "role": "agent",
            "status": "idle",
            "backend": "tmux",
            "since": 0.0,
            "version": "bench",
            "last_seen": time.time(),
            "interval": 5.0,
        }
        for h in range(hosts)
        for i in range(per_host)
    ]
    gateways = [
        {"host": f"host-{h}", "version": "bench", "last_seen": time.time(), "interval": 5.0, "entities": per_host}
        for h in range(hosts)
    ]
    path = Path(env["XDG_CACHE_HOME"]) / "bridge" / "roster.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"entries": entries, "gateways": gateways}))


def fill_store(env: dict[str, str], count: int = 2000) -> None:
    code = (
        "import uuid\nfrom bridgecli.envelope import Envelope\n"
        "from bridgecli.hoststate.store import Store, default_path, HELD, DELIVERED\n"
        "s = Store(default_path()); me = str(uuid.uuid4())\n"
        f"for i in range({count}):\n"
        "    s.record(Envelope(kind='ASK' if i % 3 == 0 else 'SEND', sender=str(uuid.uuid4()), recipient=me,"
        " content=f'message {i}', sender_label='peer'), HELD if i % 2 else DELIVERED)\n"
    )
    subprocess.run([PYTHON, "-c", code], env=env, check=True)


def start_gateway(env: dict[str, str]) -> subprocess.Popen:
    """A gateway whose broker is unreachable: it serves its socket while retrying."""
    gw_env = {**env, "BRIDGE_BROKER_URI": "amqp://guest:guest@127.0.0.1:9/", "BRIDGE_HOST_ID": "bench"}
    proc = subprocess.Popen(
        [BRIDGE, "gateway"], env=gw_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    sock = Path(env["XDG_RUNTIME_DIR"]) / "bridge" / "gateway.sock"
    deadline = time.monotonic() + 30
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the bench gateway did not open its socket")
        time.sleep(0.1)
    return proc


def row(label: str, ms: float, case: dict[str, str], base: float, runs: int) -> dict:
    """One row: median TAB latency, candidates offered, heavy modules imported."""
    heavy = heavy_imports(case)
    ratio = round(ms / base, 2)
    note = (
        f"goal <={GOAL}x: {'met' if ratio <= GOAL else 'MISSED'}; {offered(case)} candidates; "
        + ("imports " + ", ".join(heavy) if heavy else "no pika/websocket/click import")
        + f"; median of {runs}, interleaved"
    )
    return {
        "benchmark": "completion",
        "metric": label,
        "value": round(ms, 1),
        "unit": "ms",
        "baseline": f"python -c pass {base:.1f} ms",
        "ratio": ratio,
        "note": note,
    }


def main(runs: int = 20) -> list[dict]:
    """Rows for bench/run_all.py: one per case, baseline = `python -c pass`, all timed in
    interleaved rounds. The live-gateway case is a second home whose gateway runs throughout
    (in the first home a gateway would answer the roster-cache case)."""
    root = Path(tempfile.mkdtemp(prefix="bcb", dir="/tmp"))
    gateway = None
    try:
        env = make_env(root / "h")
        fill_roster_cache(env)
        fill_store(env)
        live = make_env(root / "g")
        gateway = start_gateway(live)
        tabs = {
            "bridge bro<TAB> (commands)": tab_env(env, "bridge bro"),
            "bridge send <TAB> (roster cache, 200 entities)": tab_env(env, "bridge send "),
            "bridge reply <TAB> (store, 2000 messages)": tab_env(env, "bridge reply "),
            "bridge send <TAB> (live gateway socket, empty roster)": tab_env(live, "bridge send "),
        }
        cases = {"python -c pass": ([PYTHON, "-c", "pass"], env)}
        cases.update({label: ([BRIDGE], case) for label, case in tabs.items()})
        medians = interleaved_ms(cases, runs)
        base = medians["python -c pass"]
        return [row(label, medians[label], case, base, runs) for label, case in tabs.items()]
    finally:
        if gateway is not None:
            os.killpg(gateway.pid, signal.SIGTERM)
            gateway.wait(20)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    for row in main(parser.parse_args().runs):
        print(f"{row['metric']:<50} {row['value']:>7.1f} ms {row['ratio']:>6.2f}x  {row['baseline']}; {row['note']}")
