"""docs/cli.md stays in step with the code: its command reference is every command's --help
and its exit-code table lists every ExitCode member."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_cli_reference_is_regenerated_identically_in_any_environment(bridge_home):
    # a narrow terminal and an empty host must not change a byte of the generated page
    env = {**bridge_home.env, "COLUMNS": "40", "BRIDGE_LOAD_PLUGINS": "webhook"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_reference_covers_every_builtin_command_and_subcommand():
    from bridgecli.cli import BUILTIN_COMMANDS
    from bridgecli.cli.browser import BROWSER_COMMANDS

    doc = (ROOT / "docs" / "cli.md").read_text()
    for name in BUILTIN_COMMANDS:
        assert f"### `bridge {name}`\n" in doc
    for name in BROWSER_COMMANDS:
        assert f"### `bridge browser {name}`\n" in doc
    assert "Usage: bridge dlq retry [OPTIONS] ID..." in doc
