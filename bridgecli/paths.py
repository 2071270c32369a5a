"""Every file location bridge uses, from platformdirs.

All paths honour the ``XDG_*`` variables, which is what lets the test suite (and a user) run
several independent "hosts" side by side on one machine: give each its own
``XDG_CONFIG_HOME``/``XDG_DATA_HOME``/``XDG_STATE_HOME``/``XDG_RUNTIME_DIR``/``XDG_CACHE_HOME``.
Paths are computed on each call (never at import time) so that tests can change the
environment between calls.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bridgecli.socketpath import APP, SOCKET_NAME, from_environment

#: kind -> (XDG variable, default under $HOME) of the XDG base-directory spec
_XDG = {"config": ("XDG_CONFIG_HOME", ".config"), "data": ("XDG_DATA_HOME", ".local/share"),
        "cache": ("XDG_CACHE_HOME", ".cache"), "state": ("XDG_STATE_HOME", ".local/state")}


def _xdg(kind: str) -> str | None:
    """On Linux, ``$XDG_..._HOME/bridge`` or ``~/DEFAULT/bridge`` exactly as platformdirs
    computes it (tests/test_paths_xdg.py compares them), without its import cost, which a
    TAB pays on every keystroke; None (ask platformdirs) elsewhere or when HOME is unusual."""
    if sys.platform != "linux":
        return None
    var, default = _XDG[kind]
    value = os.environ.get(var, "")
    if os.path.isabs(value):
        return os.path.join(value, APP)
    home = os.environ.get("HOME", "")
    if not os.path.isabs(home):
        return None
    return os.path.join(os.path.expanduser(f"~/{default}"), APP)


def _dirs():  # -> platformdirs.PlatformDirs
    # imported here, not at module level: `bridge send` through the gateway only needs the
    # socket path, which XDG_RUNTIME_DIR gives without platformdirs' import cost
    import platformdirs

    return platformdirs.PlatformDirs(APP, appauthor=False)


def config_dir() -> Path:
    """Directory of ``bridge.toml`` (``$XDG_CONFIG_HOME/bridge``)."""
    return Path(_xdg("config") or _dirs().user_config_dir)


def config_file() -> Path:
    """The configuration file; ``BRIDGE_CONFIG`` overrides its location."""
    override = os.environ.get("BRIDGE_CONFIG")
    return Path(override) if override else config_dir() / "bridge.toml"


def data_dir() -> Path:
    """Durable host data: the entity registry, the embedded broker's node."""
    return Path(_xdg("data") or _dirs().user_data_dir)


def state_dir() -> Path:
    """Durable gateway state: dedup store, held messages, logs."""
    return Path(_xdg("state") or _dirs().user_state_dir)


def cache_dir() -> Path:
    """Disposable data (completion cache); also the root of the browser token file."""
    return Path(_xdg("cache") or _dirs().user_cache_dir)


def user_cache_root() -> Path:
    """The user cache dir *without* our app suffix (the browser bridge keeps
    ``opencode-browser/bridge.json`` directly under it, docs/design.md#browser-token)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir())


def runtime_dir() -> Path:
    """Per-boot runtime files: the gateway's local socket and pid file.

    Without ``XDG_RUNTIME_DIR`` platformdirs falls back to ``/tmp/runtime-<uid>`` and warns;
    the fallback is fine for us (we create it 0700), so the warning is silenced. An
    ``XDG_RUNTIME_DIR`` that is not mode 0700 is still honoured (platformdirs would silently
    fall back, which would make two isolated instances share one socket): our own ``bridge``
    subdirectory is created 0700, which is what protects the socket.
    """
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return Path(xdg) / APP
    import warnings  # only for this fallback: a TAB should not pay for it

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Path(_dirs().user_runtime_dir)


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) with mode 0700 for the leaf; return it."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(path, 0o700)
    except PermissionError:
        pass
    return path


def gateway_socket() -> Path:
    """The local gateway API socket (mode 0600). ``BRIDGE_GATEWAY_SOCKET`` overrides it;
    launchers set that variable in children so they find their own gateway."""
    found = from_environment()
    return Path(found) if found else runtime_dir() / SOCKET_NAME
