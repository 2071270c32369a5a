"""On CI every test must run: a skip, at run time or at collection, fails the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPER = "tests/data/collect_skip/skipper.py"


def _pytest(ci: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", SKIPPER, "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_module_skipped_at_collection_fails_on_ci_only():
    local = _pytest(ci=False)
    assert local.returncode in (0, 5) and "1 skipped" in local.stdout, local.stdout  # 5: no test ran
    ci = _pytest(ci=True)
    assert ci.returncode != 0 and "skipped at collection on CI" in ci.stdout, ci.stdout
