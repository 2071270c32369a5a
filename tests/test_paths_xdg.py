"""bridgecli.paths computes the XDG directories itself on Linux (a TAB cannot afford
platformdirs' import); it must give exactly what platformdirs gives."""

from __future__ import annotations

import sys
from pathlib import Path

import platformdirs
import pytest

from bridgecli import paths

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the shortcut is Linux-only")

CASES = [
    {},
    {"HOME": "/home/someone"},
    {"HOME": "/home/someone/"},
    {"HOME": "/"},
    {"HOME": "relative/home"},
    {
        "XDG_CONFIG_HOME": "/x/config",
        "XDG_DATA_HOME": "/x/data",
        "XDG_STATE_HOME": "/x/state",
        "XDG_CACHE_HOME": "/x/cache",
    },
    {"XDG_CONFIG_HOME": "relative", "XDG_DATA_HOME": "", "XDG_STATE_HOME": " ", "XDG_CACHE_HOME": "~/c"},
]


@pytest.mark.parametrize("env", CASES)
def test_directories_equal_platformdirs(monkeypatch, env):
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    expected = platformdirs.PlatformDirs(paths.APP, appauthor=False)
    assert str(paths.config_dir()) == str(Path(expected.user_config_dir))
    assert str(paths.data_dir()) == str(Path(expected.user_data_dir))
    assert str(paths.state_dir()) == str(Path(expected.user_state_dir))
    assert str(paths.cache_dir()) == str(Path(expected.user_cache_dir))
