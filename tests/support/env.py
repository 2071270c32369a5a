"""Isolation of bridge's files: every test that runs the CLI gets its own XDG dirs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

#: the installed console script of the venv running the tests
BRIDGE_BIN = str(Path(sys.executable).with_name("bridge"))


@dataclass
class BridgeHome:
    """One isolated "host": its XDG dirs and the environment that selects them."""

    root: Path
    env: dict[str, str]

    @property
    def config_file(self) -> Path:
        return Path(self.env["XDG_CONFIG_HOME"]) / "bridge" / "bridge.toml"

    @property
    def data_dir(self) -> Path:
        return Path(self.env["XDG_DATA_HOME"]) / "bridge"


def make_home(root: Path) -> BridgeHome:
    """XDG dirs under ``root`` plus an environment without any BRIDGE_* leakage."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BRIDGE_", "XDG_", "OCB_"))}
    for name in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
        path = root / name.lower()
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        env[f"XDG_{name}_{'DIR' if name == 'RUNTIME' else 'HOME'}"] = str(path)
    return BridgeHome(root=root, env=env)


@pytest.fixture
def bridge_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[BridgeHome]:
    """A fresh isolated host for this test: XDG_* point into a short /tmp dir (also set in
    ``os.environ`` for in-process CliRunner calls); BRIDGE_* variables are cleared and the
    plugin cache is reset. ``.env`` is the environment for subprocesses."""
    from bridgecli import plugins

    root = Path(tempfile.mkdtemp(prefix="bh", dir="/tmp"))
    home = make_home(root)
    for key in list(os.environ):
        if key.startswith(("BRIDGE_", "OCB_")) and key != "BRIDGE_TEST_BROKER_URI":
            monkeypatch.delenv(key)
    for key, value in home.env.items():
        if key.startswith("XDG_"):
            monkeypatch.setenv(key, value)
    plugins.reset()
    yield home
    plugins.reset()
    shutil.rmtree(root, ignore_errors=True)


def run_bridge(
    *args: str, env: dict[str, str], timeout: float = 120, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``bridge`` console script as a real subprocess."""

    return subprocess.run(
        [BRIDGE_BIN, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
        stdin=None if input else subprocess.DEVNULL,
    )
