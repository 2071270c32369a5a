"""Start-up cost of one-shot `bridge` commands against a bare interpreter start.

Prints, from one run, the median wall time of ``bridge --version``, ``bridge --help`` and
``bridge send --help`` next to ``python -c pass`` (the venv's real interpreter, never a pyenv
shim), all timed in interleaved rounds, and their ratio. Goals: ``--version`` and ``--help``
<= 4x the bare interpreter (the warm-up runs write the cached help text, as a user's first
``--help`` does). Also reports whether pika or a WebSocket library was imported on those
paths (it must not be).

Run: ``.venv/bin/python bench/cli_startup.py [--runs N]``. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
PYTHON = str(VENV_BIN / "python")
BRIDGE = str(VENV_BIN / "bridge")
CASES = [("bridge --version", ["--version"]), ("bridge --help", ["--help"]), ("bridge send --help", ["send", "--help"])]
HEAVY = ("pika", "websockets", "websocket", "mcp")
GOAL = {"bridge --version": 4, "bridge --help": 4}  # <= 4x the bare interpreter


def _env() -> dict[str, str]:
    root = Path(tempfile.mkdtemp(prefix="bcs", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRIDGE_", "XDG_"))}
    # a user's shell writes bytecode caches; with this set every run would recompile bridge
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        env[f"XDG_{name}_HOME"] = str(root / name.lower())
    env["XDG_RUNTIME_DIR"] = str(root / "run")
    return env


def median_ms(cmd: list[str], env: dict[str, str], runs: int, warmup: int = 3) -> float:
    """Median wall time of ``cmd`` in milliseconds (stdout/stderr discarded)."""
    return interleaved_ms({"cmd": (cmd, env)}, runs, warmup)["cmd"]


def interleaved_ms(cases: dict[str, tuple[list[str], dict[str, str]]], runs: int, warmup: int = 3) -> dict[str, float]:
    """Median wall time in milliseconds of each ``name: (cmd, env)``, run in interleaved
    rounds (each round runs every case once), so a load spike on this shared machine hits
    every case alike rather than one of them; the first ``warmup`` rounds are not counted."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(warmup + runs):
        for name, (cmd, env) in cases.items():
            began = time.perf_counter()
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if i >= warmup:
                samples[name].append((time.perf_counter() - began) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def heavy_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    """Which heavy modules are in sys.modules after running ``bridge ARGV`` in-process."""
    # through the console script's own entry point, so its click-free fast paths count
    # with the console script's sys.path, so the CLI snapshot its timed runs cached is the one used
    probe = (
        f"import sys\nsys.path[0] = {str(VENV_BIN)!r}\nsys.argv = ['bridge', *{argv!r}]\n"
        "from bridgecli.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    proc = subprocess.run([PYTHON, "-c", probe], env=env, capture_output=True, text=True)
    return [m for m in proc.stderr.strip().splitlines()[-1:][0].split(",") if m] if proc.stderr.strip() else []


def main(runs: int = 20) -> list[dict]:
    """Rows for bench/run_all.py: one per command, baseline = `python -c pass` (interleaved)."""
    env = _env()
    cases = {"python -c pass": ([PYTHON, "-c", "pass"], env)}
    cases.update({label: ([BRIDGE, *argv], env) for label, argv in CASES})
    medians = interleaved_ms(cases, runs)
    base = medians["python -c pass"]
    rows = []
    for label, argv in CASES:
        ms = medians[label]
        heavy = heavy_imports(argv, env)
        ratio = round(ms / base, 2)
        notes = []
        if label in GOAL:  # the same wording as bench/messaging.py's rows
            notes.append(f"goal <={GOAL[label]}x: {'met' if ratio <= GOAL[label] else 'MISSED'}")
        notes.append("imports " + ", ".join(heavy) if heavy else "no pika/websocket import")
        notes.append(f"median of {runs}, interleaved")
        rows.append(
            {
                "benchmark": "cli_startup",
                "metric": label,
                "value": round(ms, 1),
                "unit": "ms",
                "baseline": f"python -c pass {base:.1f} ms",
                "ratio": ratio,
                "note": "; ".join(notes),
            }
        )
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"{'command':<22} {'median':>9} {'ratio':>7}  baseline / note")
    for r in rows:
        print(f"{r['metric']:<22} {r['value']:>6.1f} ms {r['ratio']:>6.2f}x  {r['baseline']}; {r['note']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    rows = main(parser.parse_args().runs)
    print_table(rows)
    version = rows[0]
    print(
        f"\ngoal bridge --version <= 4x bare interpreter: "
        f"{'met' if version['ratio'] <= 4 else 'MISSED'} ({version['ratio']}x)"
    )
