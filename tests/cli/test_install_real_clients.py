"""The entries `bridge install` writes, read by the real Claude Code and OpenCode CLIs.

Their `mcp list` starts every configured server and does the MCP handshake, so a passing
test means the client found the entry in the file bridge wrote and ran this bridge. The CLIs
come from npm into `.venv/agent-clis` (reused when present); a failed npm install fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.env import BRIDGE_BIN, make_home, run_bridge

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".venv" / "agent-clis"
PACKAGES = ["@anthropic-ai/claude-code", "opencode-ai"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def agent_bin() -> Path:
    """The directory holding the real `claude` and `opencode` (npm-installed once)."""
    bin_dir = CACHE / "node_modules" / ".bin"
    if all((bin_dir / name).exists() for name in ("claude", "opencode")):
        return bin_dir
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not on PATH: install Node.js (20+) to run the real-client tests")
    CACHE.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", *PACKAGES],
        cwd=CACHE,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 or not all((bin_dir / name).exists() for name in ("claude", "opencode")):
        pytest.fail(f"npm install {' '.join(PACKAGES)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return bin_dir


@pytest.fixture
def client_env(agent_bin, bridge_home):
    """A HOME with Claude Code's first-run state, the CLIs on PATH and a made-up API key."""
    root = Path(tempfile.mkdtemp(prefix="ic", dir="/tmp"))
    home = make_home(root)
    project = root / "project"
    project.mkdir()
    (root / "home" / ".claude").mkdir(parents=True)
    (root / "home" / ".config" / "opencode").mkdir(parents=True)
    env = {
        **home.env,
        "HOME": str(root / "home"),
        "XDG_CONFIG_HOME": str(root / "home" / ".config"),
        "PATH": f"{agent_bin}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin",
        "ANTHROPIC_API_KEY": "sk-ant-made-up-for-tests",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    yield env, root / "home", project
    shutil.rmtree(root, ignore_errors=True)


def _list(env: dict[str, str], cwd: Path, *command: str) -> str:
    done = subprocess.run(
        list(command), env=env, cwd=cwd, capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL
    )
    return ANSI.sub("", done.stdout + done.stderr)


def test_claude_code_connects_to_the_installed_entry(client_env):
    env, home, project = client_env
    done = run_bridge("install", "claude-code", env=env)
    assert done.returncode == 0, done.stderr
    text = _list(env, project, "claude", "mcp", "list")
    assert re.search(rf"bridge: {re.escape(BRIDGE_BIN)} mcp - ✔ Connected", text), text


def test_opencode_connects_to_the_installed_entry(client_env):
    env, home, project = client_env
    done = run_bridge("install", "opencode", env=env)
    assert done.returncode == 0, done.stderr
    text = _list(env, project, "opencode", "mcp", "list")
    assert re.search(r"✓ bridge\s+connected", text), text
    assert f"{BRIDGE_BIN} mcp" in text


def test_project_scope_is_read_by_both_clients(client_env):
    env, home, project = client_env
    old = os.getcwd()
    os.chdir(project)
    try:
        done = run_bridge("install", "claude-code", "opencode", "--scope", "project", "--label", "proj", env=env)
    finally:
        os.chdir(old)
    assert done.returncode == 0, done.stderr
    assert (project / ".mcp.json").exists() and (project / "opencode.json").exists()
    opencode = _list(env, project, "opencode", "mcp", "list")
    assert re.search(r"✓ bridge\s+connected", opencode), opencode
    claude = _list(env, project, "claude", "mcp", "list")
    # a project's .mcp.json needs the user's approval before Claude Code runs it
    assert "bridge" in claude and "--label proj" in claude, claude
