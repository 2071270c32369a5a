"""The chaos soak, short: ``bench/chaos.py`` for a minute of random faults on three joined
hosts and a hub, then its checker's bar (0 lost, 0 duplicated, 0 unexpected). The long run
is a benchmark (docs/reliability.md); this one keeps the soak and what it proves from rotting.
A failure prints the schedule number, which ``bench/chaos.py --schedule N`` replays."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.netns import netns_supported

pytestmark = [pytest.mark.netns, pytest.mark.slow]

CHAOS = Path(__file__).resolve().parents[2] / "bench" / "chaos.py"


@pytest.mark.timeout(900)
def test_a_minute_of_random_faults_loses_duplicates_and_invents_nothing():
    reason = netns_supported()
    if reason:
        pytest.skip(reason)
    run = subprocess.run(
        [sys.executable, str(CHAOS), "--seconds", "60", "--hosts", "3", "--drain", "90"],
        capture_output=True,
        text=True,
        timeout=840,
    )
    out = run.stdout
    schedule = re.search(r"^schedule (\d+)", out, re.M)
    assert schedule, f"no schedule printed:\n{out[-3000:]}\n{run.stderr[-3000:]}"
    replay = f"replay: bench/chaos.py --seconds 60 --hosts 3 --schedule {schedule.group(1)}"
    assert run.returncode == 0 and "\nPASS" in out, f"{replay}\n{out[-6000:]}\n{run.stderr[-3000:]}"
    table = re.search(r"^\| (\d+) \| (\d+) \|", out, re.M)  # sends, ok
    assert table and int(table.group(2)) > 100, f"too little traffic to judge:\n{out[-4000:]}"
    injected = [int(n) for n in re.findall(r"^\| [^|\d][^|]* \| (\d+) \|$", out, re.M)]
    assert sum(injected) >= 5, f"too few faults to judge ({injected}):\n{out[-4000:]}"
