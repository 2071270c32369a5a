"""`bridge completion SHELL` and completions/: click's own scripts, byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bridgecli.cli.completion import SHELLS
from tests.support.env import run_bridge

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_scripts_are_what_click_generates_now():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_completions.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_bridge_completion_prints_clicks_source_instruction(bridge_home, shell):
    printed = run_bridge("completion", shell, env=bridge_home.env)
    clicks_own = run_bridge(env={**bridge_home.env, "_BRIDGE_COMPLETE": f"{shell}_source"})
    assert printed.returncode == 0 and printed.stderr == ""
    assert printed.stdout == clicks_own.stdout
    assert printed.stdout == (ROOT / "completions" / SHELLS[shell]).read_text()
    assert "_BRIDGE_COMPLETE" in printed.stdout


def test_unknown_shell_is_a_usage_error_naming_the_choices(bridge_home):
    proc = run_bridge("completion", "tcsh", env=bridge_home.env)
    assert proc.returncode == 2
    assert "'tcsh' is not one of 'bash', 'fish', 'zsh'" in proc.stderr


def test_the_checked_in_bash_script_completes_commands_in_real_bash(bridge_home):
    """Source completions/bridge.bash in bash and press TAB after `bridge bro`."""
    env = {**bridge_home.env, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    script = (
        f"source {ROOT / 'completions' / 'bridge.bash'}\n"
        "COMP_WORDS=(bridge bro); COMP_CWORD=1; _bridge_completion bridge\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.split() == ["broker", "browser"], proc.stderr
