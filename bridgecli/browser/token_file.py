"""``bridge.json``: the per-user state file through which adapters share the broker token.

The host writes ``{v, port, token, pid}`` to ``<user cache dir>/opencode-browser/bridge.json``
and guests read it (docs/design.md#browser-token). It holds a secret: created 0600 in a 0700
directory, written atomically (temp file + ``os.replace``), and refused, as ssh refuses a
private key, when group or others can read it.

:func:`resolve_token`: an explicit token (``browser.token`` / ``BRIDGE_BROWSER_TOKEN`` /
``OCB_TOKEN``) wins and is written to the file; else the file's token is reused, so the one
pasted into the extension stays valid; else a new one is generated.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Any

from bridgecli import paths
from bridgecli.errors import ConfigError, PermissionProblem

FILE_VERSION = 1


def path() -> Path:
    """Where the token file lives (honours ``XDG_CACHE_HOME``)."""
    return paths.user_cache_root() / "opencode-browser" / "bridge.json"


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe so it can be pasted anywhere)."""
    return secrets.token_urlsafe(32)


def check_mode(file: Path) -> None:
    """Refuse a token file readable or writable by group/others (like ssh does for keys)."""
    mode = stat.S_IMODE(file.stat().st_mode)
    if mode & 0o077:
        raise PermissionProblem(
            f"{file} is accessible by group or others (mode {mode:04o}); the token in it must stay private",
            f"run `chmod 600 {file}` or `bridge token rotate`",
        )


def read(file: Path | None = None) -> dict[str, Any] | None:
    """The file's contents, or ``None`` when there is no file.

    Raises :class:`PermissionProblem` for unsafe permissions and :class:`ConfigError` for a
    damaged file.
    """
    file = file or path()
    try:
        check_mode(file)
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except PermissionError:
        raise PermissionProblem(f"cannot read {file}", "check its owner and mode") from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("token"), str) or not data["token"]:
        raise ConfigError(f"{file} is damaged (no token in it)", "run `bridge token rotate` to write a new one")
    return data


def write(port: int, token: str, file: Path | None = None, *, host: bool = False) -> Path:
    """Atomically write ``{v, port, token}`` (plus the host's ``pid`` when ``host``) with mode
    0600 in a 0700 directory."""
    file = file or path()
    paths.ensure_private_dir(file.parent)
    data: dict[str, Any] = {"v": FILE_VERSION, "port": port, "token": token}
    if host:
        data["pid"] = os.getpid()
    # mkstemp opens O_CREAT|O_EXCL with mode 0600, so the secret is never briefly world-readable.
    fd, tmp = tempfile.mkstemp(prefix=".bridge.", suffix=".json", dir=file.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return file


def clear(file: Path | None = None) -> bool:
    """Remove the file; returns whether there was one."""
    file = file or path()
    try:
        file.unlink()
        return True
    except FileNotFoundError:
        return False


def resolve_token(explicit: str | None, port: int, *, write_file: bool) -> tuple[str, bool]:
    """The token a host should use (see the module docstring) and whether it was just
    generated (whoever generates it prints it once, docs/design.md#browser-token). Writes the file when
    ``write_file`` (the host does, guests don't)."""
    token, generated = explicit, False
    if not token:
        current = read()
        token = current["token"] if current else None
        if token is None:
            token, generated = new_token(), True
    if write_file:
        write(port, token, host=True)
    return token, generated


def guest_token(explicit: str | None) -> str | None:
    """The token a guest presents: the explicit one, else the file's (``None`` without)."""
    if explicit:
        return explicit
    current = read()
    return current["token"] if current else None
