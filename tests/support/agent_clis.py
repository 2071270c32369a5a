"""The real agent CLIs from npm, installed once into ``.venv/agent-clis`` for the tests that
drive them (``install(...)``), and a HOME in which each starts offline with a made-up key."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".venv" / "agent-clis"
BIN = CACHE / "node_modules" / ".bin"
#: the program each npm package puts on PATH
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "opencode": "opencode-ai",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
}
#: the made-up key Claude Code is told to use (approved in ``.claude.json`` by ``claude_home``)
CLAUDE_KEY = "sk-ant-made-up-for-tests-0123456789abcdef"
#: the switches that keep OpenCode from the network at start (models list, updates, plugins)
OPENCODE_OFFLINE = (
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
)


def install(*programs: str) -> Path:
    """The directory holding ``programs`` (``claude``, ``opencode``, ``codex``, ``gemini``),
    installing the missing ones from npm; a failed install fails the test."""
    missing = [name for name in programs if not (BIN / name).exists()]
    if not missing:
        return BIN
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not on PATH: install Node.js (20+) to run the real-client tests")
    CACHE.mkdir(parents=True, exist_ok=True)
    packages = [PACKAGES[name] for name in missing]
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", *packages],
        cwd=CACHE,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0 or not all((BIN / name).exists() for name in missing):
        pytest.fail(f"npm install {' '.join(packages)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return BIN


def client_env(home: Path, bin_dir: Path) -> dict[str, str]:
    """The variables that let every CLI start offline in ``home``, with ``bin_dir`` on PATH."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "PATH": f"{bin_dir}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin",
        "ANTHROPIC_API_KEY": CLAUDE_KEY,
        "OPENAI_API_KEY": "sk-made-up-for-tests",
        "GEMINI_API_KEY": "made-up-for-tests",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # OpenCode: its bundled model list instead of a fetch that times out offline (seconds)
        **dict.fromkeys(OPENCODE_OFFLINE, "1"),
    }


def claude_home(home: Path, *projects: Path) -> None:
    """Claude Code's first-run state in ``home``: onboarding done, ``projects`` trusted and
    :data:`CLAUDE_KEY` approved, so its TUI opens straight on its prompt."""
    import json

    (home / ".claude").mkdir(parents=True, exist_ok=True)
    state = {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": [CLAUDE_KEY[-20:]], "rejected": []},
        "projects": {str(p): {"hasTrustDialogAccepted": True} for p in projects},
    }
    (home / ".claude.json").write_text(json.dumps(state))


def gemini_home(home: Path, *projects: Path) -> None:
    """Gemini CLI's first-run state in ``home``: ``projects`` trusted and the API key (from
    ``GEMINI_API_KEY``) chosen as its sign-in, so its TUI opens straight on its prompt."""
    import json

    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    trusted = {str(p): "TRUST_FOLDER" for p in projects}
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps(trusted))
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
