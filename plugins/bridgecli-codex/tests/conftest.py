"""Fixtures for the codex plugin: the real codex CLI (installed from npm if missing, never
skipped), a private HOME and CODEX_HOME per test, and a model endpoint that never answers, so
a turn codex starts stays running until it is interrupted. Servers are killed in teardown.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from codex_helpers import new_thread, start_server, stop_server, write_config

from bridgecli_codex.client import Address, Endpoint
from tests.support import agent_clis


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short private dir (codex links each socket under /tmp; ours stay short anyway)."""
    path = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def codex_bin() -> Path:
    """The real ``codex`` program; a failed install fails the test."""
    return agent_clis.install("codex") / "codex"


@pytest.fixture
def model_hole() -> Iterator[str]:
    """An OpenAI base URL on a port that accepts connections and never answers: every model
    request of a turn hangs, so the turn stays ``inProgress`` (no timing in the tests)."""
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    yield f"http://127.0.0.1:{hole.getsockname()[1]}/v1"
    hole.close()


@pytest.fixture
def codex_env(short_tmp: Path, codex_bin: Path, model_hole: str) -> dict[str, str]:
    """The environment codex runs in: its own HOME and CODEX_HOME, a made-up key, no model."""
    home = short_tmp / "home"
    (home / ".codex").mkdir(parents=True)
    return {
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "OPENAI_API_KEY": "sk-made-up-for-tests",
        "OPENAI_BASE_URL": model_hole,
        "PATH": f"{codex_bin.parent}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin",
    }


@dataclass
class Running:
    """A test's app-server: its process and a thread started on it."""

    proc: subprocess.Popen[bytes]
    address: Address


@pytest.fixture
def app_server(short_tmp: Path, codex_bin: Path, codex_env: dict[str, str]) -> Iterator[Callable[..., Running]]:
    """Start ``codex app-server`` on a fresh socket (or on ``sock``) and a thread on it.
    Every server started is killed in teardown."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(sock: Path | None = None) -> Running:
        sock = sock or short_tmp / f"s{len(procs)}.sock"
        procs.append(start_server(codex_bin, sock, codex_env))
        endpoint = Endpoint("unix", str(sock))
        return Running(procs[-1], Address(endpoint, new_thread(endpoint, cwd=codex_env["HOME"])))

    yield start
    for proc in procs:
        stop_server(proc)


@pytest.fixture
def xdg(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every XDG dir into the temp dir and drop BRIDGE_* from the environment."""
    for key in list(os.environ):
        if key.startswith("BRIDGE_"):
            monkeypatch.delenv(key)
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        (short_tmp / name.lower()).mkdir()
        monkeypatch.setenv(f"XDG_{name}_HOME", str(short_tmp / name.lower()))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_tmp))
    return short_tmp


def _provider(xdg: Path, kind: str, settings: dict[str, object]) -> object:
    import json

    from bridgecli import config, plugins
    from bridgecli.interfaces import BackendContext

    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items())
    write_config(xdg, "[plugins.codex]\n" + lines)
    plugins.reset()
    factory = plugins.get().provider(kind, "codex")
    cfg = config.load()
    if kind == "backends":
        return factory(BackendContext(config=cfg, state_dir=xdg / "state", host_id="test"))
    return factory(cfg)


@pytest.fixture
def make_backend(xdg: Path) -> Callable[..., object]:
    """Build the backend the way the gateway does (plugin factory, BackendContext from
    ``bridgecli.config.load()``); ``settings`` become ``[plugins.codex]`` lines."""
    return lambda **settings: _provider(xdg, "backends", settings)


@pytest.fixture
def make_launcher(xdg: Path) -> Callable[..., object]:
    """Build the launcher the way the gateway does; ``settings`` as for ``make_backend``."""
    return lambda **settings: _provider(xdg, "launchers", settings)
