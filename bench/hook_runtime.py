"""Run time of ``bridge hook claude-code prompt``, the command Claude Code runs at every prompt.

Median wall time of the hook fed two frame markers, against ``python -c pass`` in interleaved
rounds: with no gateway listening, and with a socket answering as the gateway's local API does
(the hook's own cost of its two calls). Goal (bridgecli/hooks.py): at most 60 ms over the bare
interpreter. Run: ``.venv/bin/python bench/hook_runtime.py [--runs N]``. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cli_startup import PYTHON, _env  # noqa: E402 (bench/ is a directory of scripts)

BRIDGE = str(Path(sys.executable).parent / "bridge")
GOAL_MS = 60.0
PROMPT = "[bridge 0123abcd] SEND from main · msg 0123abcd\n│ hello\n[end bridge 0123abcd]\n[bridge 89abcdef] ASK"


def _answering_socket(path: str) -> socket.socket:
    """A Unix socket answering each request line with ``{"ok": true}``, served by a thread."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as stream:
                for _line in stream:
                    stream.write(b'{"ok":true,"read":[]}\n')
                    stream.flush()

    threading.Thread(target=serve, daemon=True).start()
    return server


def _time(cases: dict[str, tuple[list[str], dict[str, str]]], stdin: Path, runs: int) -> dict[str, float]:
    """Median ms per case, interleaved rounds, each run fed ``stdin``."""
    import statistics
    import subprocess
    import time

    samples: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(3 + runs):
        for name, (cmd, env) in cases.items():
            with stdin.open("rb") as feed:
                began = time.perf_counter()
                subprocess.run(cmd, env=env, stdin=feed, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if i >= 3:
                    samples[name].append((time.perf_counter() - began) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def main(runs: int = 30) -> list[dict]:
    """Rows for bench/run_all.py: the hook without and with a listener, against ``python -c pass``."""
    env = _env()
    env["TMUX_PANE"] = "%1"
    os.makedirs(os.path.join(env["XDG_RUNTIME_DIR"], "bridge"), exist_ok=True)
    answered = dict(env, BRIDGE_GATEWAY_SOCKET=os.path.join(tempfile.mkdtemp(prefix="bhr", dir="/tmp"), "g.sock"))
    server = _answering_socket(answered["BRIDGE_GATEWAY_SOCKET"])
    stdin = Path(tempfile.mkdtemp(prefix="bhr", dir="/tmp")) / "prompt.json"
    stdin.write_text(json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": PROMPT}))
    hook = [BRIDGE, "hook", "claude-code", "prompt"]
    try:
        medians = _time(
            {
                "python -c pass": ([PYTHON, "-c", "pass"], env),
                "hook, no gateway": (hook, env),
                "hook, answering socket": (hook, answered),
            },
            stdin,
            runs,
        )
    finally:
        server.close()
    base = medians["python -c pass"]
    rows = []
    for label in ("hook, no gateway", "hook, answering socket"):
        ms = medians[label]
        over = ms - base
        rows.append(
            {
                "benchmark": "hook_runtime",
                "metric": label,
                "value": round(ms, 1),
                "unit": "ms",
                "baseline": f"python -c pass {base:.1f} ms",
                "ratio": round(ms / base, 2),
                "note": f"+{over:.1f} ms; goal <= +{GOAL_MS:.0f} ms: {'met' if over <= GOAL_MS else 'MISSED'}; "
                f"median of {runs}, interleaved",
            }
        )
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    rows = main(parser.parse_args().runs)
    print(f"{'command':<24} {'median':>9} {'ratio':>7}  baseline / note")
    for r in rows:
        print(f"{r['metric']:<24} {r['value']:>6.1f} ms {r['ratio']:>6.2f}x  {r['baseline']}; {r['note']}")
