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

from bridgecli.socketpath import APP, SOCKET_NAME, from_environment

TYPE_CHECKING = False  # pathlib costs a TAB a third of Python's start-up: see *_text()
if TYPE_CHECKING:
    from pathlib import Path
    from typing import BinaryIO

#: kind -> (XDG variable, default under $HOME) of the XDG base-directory spec
_XDG = {
    "config": ("XDG_CONFIG_HOME", ".config"),
    "data": ("XDG_DATA_HOME", ".local/share"),
    "cache": ("XDG_CACHE_HOME", ".cache"),
    "state": ("XDG_STATE_HOME", ".local/state"),
}


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


def _path(text: str) -> Path:
    from pathlib import Path

    return Path(text)


def dir_text(kind: str) -> str:
    """The directory ``kind`` ("config", "data", "state" or "cache") as text: what
    ``KIND_dir()`` returns, for callers that must not import pathlib (a TAB)."""
    return _xdg(kind) or getattr(_dirs(), f"user_{kind}_dir")


def config_dir() -> Path:
    """Directory of ``bridge.toml`` (``$XDG_CONFIG_HOME/bridge``)."""
    return _path(dir_text("config"))


def config_file() -> Path:
    """The configuration file; ``BRIDGE_CONFIG`` overrides its location."""
    override = os.environ.get("BRIDGE_CONFIG")
    return _path(override) if override else config_dir() / "bridge.toml"


def data_dir() -> Path:
    """Durable host data: the entity registry, the embedded broker's node."""
    return _path(dir_text("data"))


def state_dir() -> Path:
    """Durable gateway state: dedup store, held messages, logs."""
    return _path(dir_text("state"))


def cache_dir() -> Path:
    """Disposable data (completion cache); also the root of the browser token file."""
    return _path(dir_text("cache"))


def user_cache_root() -> Path:
    """The user cache dir *without* our app suffix (the browser bridge keeps
    ``opencode-browser/bridge.json`` directly under it, docs/design.md#browser-token)."""
    import platformdirs

    return _path(platformdirs.user_cache_dir())


def runtime_text() -> str:
    """Per-boot runtime files (the gateway's local socket and pid file), as text.

    Without ``XDG_RUNTIME_DIR`` platformdirs falls back to ``/tmp/runtime-<uid>`` and warns;
    the fallback is fine for us (we create it 0700), so the warning is silenced. An
    ``XDG_RUNTIME_DIR`` that is not mode 0700 is still honoured (platformdirs would silently
    fall back, which would make two isolated instances share one socket): our own ``bridge``
    subdirectory is created 0700, which is what protects the socket.
    """
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return os.path.join(xdg, APP)
    import warnings  # only for this fallback: a TAB should not pay for it

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _dirs().user_runtime_dir


def runtime_dir() -> Path:
    """:func:`runtime_text` as a Path."""
    return _path(runtime_text())


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` with every missing parent at mode 0700 (as the XDG spec asks of base
    directories), set the leaf to 0700 too, and return it: other local users must not list
    or read what bridge keeps (held messages, labels, logs, credentials)."""
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:  # made by another process meanwhile
            pass
    path.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(path, 0o700)
    except PermissionError:
        pass
    return path


def ensure_private_file(path: Path) -> Path:
    """Create ``path`` empty with mode 0600 unless it exists, else take the group's and
    others' bits off it; return it. Called before SQLite opens a database: SQLite gives the
    ``-wal`` and ``-shm`` files the main file's mode, so all three stay private."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600))
    except FileExistsError:
        tighten(path)
    return path


def open_private_append(path: Path) -> BinaryIO:
    """``path`` opened for appending in binary, created 0600 (existing: tightened)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    tighten(path)
    return os.fdopen(fd, "ab")


def tighten(path: Path) -> bool:
    """Take the group's and others' permission bits off ``path`` (a file or directory that
    may be missing); True when its mode changed. Owner bits are kept (a 0400 cookie stays)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    if mode & 0o077 == 0 or (mode & 0o170000) == 0o120000:  # private already, or a symlink
        return False
    try:
        os.chmod(path, mode & 0o7700)
    except OSError:
        return False
    return True


def tighten_tree(root: Path) -> int:
    """:func:`tighten` ``root`` and everything under it (symlinks are not followed); returns
    how many entries changed. How files written by an earlier version (0644 in 0755
    directories) become private at the next start."""
    changed = int(tighten(root))
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            changed += tighten(_path(os.path.join(top, name)))
    return changed


def gateway_socket() -> Path:
    """The local gateway API socket (mode 0600). ``BRIDGE_GATEWAY_SOCKET`` overrides it;
    launchers set that variable in children so they find their own gateway."""
    return _path(gateway_socket_text())


def gateway_socket_text() -> str:
    """:func:`gateway_socket` as text (for a TAB, which must not import pathlib)."""
    return from_environment() or os.path.join(runtime_text(), SOCKET_NAME)
