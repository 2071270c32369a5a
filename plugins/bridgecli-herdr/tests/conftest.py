"""Fixtures for the herdr plugin: a fake herdr server (fake_herdr.py) and isolated XDG dirs."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_herdr import FakeHerdr


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="bh", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def xdg(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every XDG dir inside the temp dir; no BRIDGE_*/HERDR_* leaks in from the caller."""
    for key in list(os.environ):
        if key.startswith(("BRIDGE_", "HERDR_")):
            monkeypatch.delenv(key)
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        (short_tmp / name.lower()).mkdir()
        monkeypatch.setenv(f"XDG_{name}_HOME", str(short_tmp / name.lower()))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_tmp))
    return short_tmp


@pytest.fixture
def herdr(xdg: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHerdr]:
    """A fake herdr 0.8.2 (protocol 20) found the way herdr's own clients find it:
    ``$HERDR_SOCKET_PATH``, with the pane variables herdr sets (README.md#herdr-env)."""
    fake = FakeHerdr(xdg / "herdr.sock").start()
    monkeypatch.setenv("HERDR_SOCKET_PATH", str(fake.path))
    monkeypatch.setenv("HERDR_ENV", "1")
    yield fake
    fake.stop()


def write_config(xdg: Path, text: str) -> None:
    path = xdg / "config" / "bridge" / "bridge.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _settings(settings: dict[str, object]) -> str:
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in settings.items()]
    return "[plugins.herdr]\n" + "\n".join(lines) + "\n"


@pytest.fixture
def make_backend(xdg: Path, herdr: FakeHerdr) -> Callable[..., object]:
    """The backend as the gateway builds it: plugin factory + BackendContext(config.load())."""
    from bridgecli import config, plugins
    from bridgecli.interfaces import BackendContext

    def build(**settings: object) -> object:
        settings.setdefault("confirm_timeout", 15)  # the CI box may be loaded; never a timing test
        write_config(xdg, _settings(settings))
        plugins.reset()
        factory = plugins.get().provider("backends", "herdr")
        return factory(BackendContext(config=config.load(), state_dir=xdg / "state", host_id="test"))

    return build


@pytest.fixture
def make_launcher(xdg: Path, herdr: FakeHerdr) -> Callable[..., object]:
    from bridgecli import config, plugins

    def build(**settings: object) -> object:
        write_config(xdg, _settings(settings))
        plugins.reset()
        return plugins.get().provider("launchers", "herdr")(config.load())

    return build
