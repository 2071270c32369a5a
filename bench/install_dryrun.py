"""What ``bridge install --all --dry-run`` costs, against ``bridge --version``.

Run in a throwaway HOME where all five clients are "installed": each has its config dir and
a user file holding another server (Codex's in TOML), so ``--all`` finds, reads and plans
an entry for every one. Baseline: ``bridge --version``, the cheapest run of the same
console script. Both interleaved, 3 warm-ups + N runs each, p50 and p95. Checks that the
dry run names five clients and leaves every file as it was.
Run: ``.venv/bin/python bench/install_dryrun.py [--runs N]``. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:  # run_all loads the scripts by path
    sys.path.insert(0, str(BENCH))

from _common import median, pct  # noqa: E402
from bench_hosts import BRIDGE, clean_env  # noqa: E402

OTHER = {"command": "/usr/bin/true", "args": []}
#: each client's user file (relative to HOME) and what the user already has in it
CLIENT_FILES = {
    ".claude.json": json.dumps({"numStartups": 3, "mcpServers": {"other": OTHER}}),
    ".codex/config.toml": 'model = "o4"\n\n[mcp_servers.other]\ncommand = "/usr/bin/true"\nargs = []\n',
    ".config/opencode/opencode.json": json.dumps({"mcp": {"other": {"type": "local", "command": ["/usr/bin/true"]}}}),
    ".gemini/settings.json": json.dumps({"theme": "dark", "mcpServers": {"other": OTHER}}),
    ".cursor/mcp.json": json.dumps({"mcpServers": {"other": OTHER}}),
}
CASES = {"bridge --version": ["--version"], "bridge install --all --dry-run": ["install", "--all", "--dry-run"]}


def fake_home(root: Path) -> dict[str, str]:
    """The environment of a user whose HOME is ``root``, with every client's file in it."""
    for name, text in CLIENT_FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / ".claude").mkdir(exist_ok=True)
    env = {k: v for k, v in clean_env().items() if not k.startswith(("BRIDGE_", "XDG_", "OCB_", "CODEX_"))}
    env.update(
        HOME=str(root),
        XDG_CONFIG_HOME=str(root / ".config"),
        XDG_DATA_HOME=str(root / ".local/share"),
        XDG_STATE_HOME=str(root / ".local/state"),
        XDG_CACHE_HOME=str(root / ".cache"),
        XDG_RUNTIME_DIR=str(root / "run"),
    )
    return env


def _files(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".cache" not in p.parts
    }


def interleaved(env: dict[str, str], cwd: Path, runs: int, warmup: int = 3) -> dict[str, list[float]]:
    """Wall ms of each case, ``runs`` samples after ``warmup`` rounds, one of each per round."""
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    for i in range(warmup + runs):
        for name, argv in CASES.items():
            began = time.perf_counter()
            subprocess.run(
                [BRIDGE, *argv],
                env=env,
                cwd=cwd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                check=True,
            )
            if i >= warmup:
                samples[name].append((time.perf_counter() - began) * 1000)
    return samples


def main(runs: int = 30) -> list[dict[str, Any]]:
    """Rows for bench/run_all.py: the dry run against ``bridge --version``."""
    root = Path(tempfile.mkdtemp(prefix="bid", dir="/tmp"))
    try:
        env = fake_home(root / "home")
        before = _files(root / "home")
        proc = subprocess.run(
            [BRIDGE, "install", "--all", "--dry-run", "--json"],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        planned = [c["client"] for c in json.loads(proc.stdout)["clients"] if c["action"] == "added"]
        samples = interleaved(env, root, runs)
        if _files(root / "home") != before:
            raise RuntimeError("bridge install --dry-run changed a file")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base, dry = samples["bridge --version"], samples["bridge install --all --dry-run"]
    ratio = round(median(dry) / median(base), 2)
    return [
        {
            "benchmark": "install_dryrun",
            "metric": f"bridge install --all --dry-run, {len(planned)} clients, p50",
            "value": round(median(dry), 1),
            "unit": "ms",
            "baseline": f"bridge --version p50 {median(base):.1f} ms",
            "ratio": ratio,
            "note": f"p95 {pct(dry, 0.95):.1f} vs {pct(base, 0.95):.1f} ms; would add to {', '.join(planned)}; "
            f"no file changed; {runs} runs each, interleaved; load {os.getloadavg()[0]:.2f}",
        }
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    for row in main(parser.parse_args().runs):
        print(f"{row['metric']}: {row['value']} ms = {row['ratio']}x {row['baseline']}; {row['note']}")
