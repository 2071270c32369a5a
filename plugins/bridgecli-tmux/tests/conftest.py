"""Fixtures for the tmux plugin: a private tmux server with a real shell, isolated XDG dirs.

tmux always runs on its own socket under a short /tmp dir and the server is killed in
teardown; the user's default server is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tmux_helpers import wait_for, write_config

from bridgecli_tmux.client import Tmux
from tests.support.tmux import server_pid, stop_server


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short private dir (Unix socket paths are limited to ~108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="bt", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def tmux_server(short_tmp: Path) -> Iterator[Tmux]:
    """A tmux server on a private socket whose first window runs ``bash --norc``."""
    sock = str(short_tmp / "s")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    subprocess.run(
        [
            "tmux",
            "-S",
            sock,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "test",
            "-x",
            "200",
            "-y",
            "50",
            "bash --norc --noprofile",
        ],
        check=True,
        env=env,
    )
    tmux = Tmux(sock)
    pid = server_pid(sock)
    yield tmux
    stop_server(sock, pid)


#: a real interactive shell with a recognisable prompt (bash enables bracketed paste)
SHELL = "env PS1='test$ ' bash --norc --noprofile"


@pytest.fixture
def new_pane(tmux_server: Tmux) -> Callable[..., str]:
    """Open a window running ``command`` and return its pane id once ``ready`` is on screen."""

    def open_pane(command: str = SHELL, ready: str | None = "test$") -> str:
        pane = tmux_server.run("new-window", "-d", "-t", "test:", "-P", "-F", "#{pane_id}", "--", command).strip()
        if ready:
            wait_for(lambda: ready in tmux_server.capture(pane), what=f"{ready!r} in {pane}")
        return pane

    return open_pane


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


@pytest.fixture
def make_backend(xdg: Path, tmux_server: Tmux) -> Callable[..., object]:
    """Build the backend the way the gateway does: plugin factory + BackendContext from
    ``bridgecli.config.load()``; ``settings`` become ``[plugins.tmux]`` lines."""
    from bridgecli import config, plugins
    from bridgecli.interfaces import BackendContext

    def build(**settings: object) -> object:
        settings.setdefault("confirm_timeout", 15)  # the CI box may be loaded; never a timing test
        lines = [f'socket = "{tmux_server.socket}"']
        lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
        write_config(xdg, "[plugins.tmux]\n" + "\n".join(lines) + "\n")
        plugins.reset()
        factory = plugins.get().provider("backends", "tmux")
        cfg = config.load()
        return factory(BackendContext(config=cfg, state_dir=xdg / "state", host_id="test"))

    return build
