"""Editing ``bridge.toml``: ``bridge config set`` / ``unset`` on schema keys, one atomic write.

Every writer of the file (these edits, :mod:`bridgecli.config_tables`, ``bridge join``) goes
through :func:`write_file`, so a failed write always leaves the old file and reads the same.
Reading and validating stay in :mod:`bridgecli.config`; this module only adds the writing.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bridgecli import paths
from bridgecli.config import FREE_FORM_SECTIONS, SETTINGS, SHOW_LISTS_KEYS, flatten, read_file, unknown_key_hint
from bridgecli.errors import CannotWrite, ConfigError

_WRITABLE = "nothing was changed; check that its directory exists, is writable and its disk is not full"


def _cannot_write(path: Path, exc: OSError, hint: str) -> CannotWrite:
    return CannotWrite(f"cannot write {path}: {exc.strerror or exc}", hint)


def write_file(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: a failure leaves the
    old file as it was and raises :class:`CannotWrite`, never a bare OSError."""
    import tomli_w  # only writers pay for it

    atomic_write(path, tomli_w.dumps(data).encode(), 0o600, f"{_WRITABLE} (or point BRIDGE_CONFIG at another file)")


def atomic_write(path: Path, payload: bytes, mode: int, hint: str = _WRITABLE) -> None:
    """Write ``payload`` to ``path`` (mode ``mode``) through a temporary file in its directory,
    fsync and a rename; a failure leaves the old file and raises :class:`CannotWrite`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".bridge.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _cannot_write(path, exc, hint) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _cannot_write(path, exc, hint) from exc
        raise


def set_value(key: str, raw: str) -> Any:
    """Validate and store ``key = raw`` in the file, preserving every other key and table."""
    return set_values({key: raw})[key]


def set_values(raw_values: Mapping[str, Any]) -> dict[str, Any]:
    """Validate every ``key = raw`` first, then store them all in one atomic write (all or
    nothing), preserving every other key and table; the file stays mode 0600."""
    path = paths.config_file()
    parsed: dict[str, Any] = {}
    for key, raw in raw_values.items():
        setting = SETTINGS.get(key)
        if setting is None:
            raise ConfigError(
                f"unknown configuration key {key!r}, not written to {path}",
                f"{unknown_key_hint(key)} {SHOW_LISTS_KEYS}",
            )
        parsed[key] = setting.parse(raw, f"bridge config set (not written to {path})")
    data = read_file(path)
    flatten(data, path)  # refuse to rewrite a file that is already invalid
    for key, value in parsed.items():
        section, name = key.split(".", 1)
        data.setdefault(section, {})[name] = value
    write_file(path, data)
    return parsed


def unset_value(key: str) -> bool:
    """Remove ``key`` from the file; returns whether it was there.

    A key the schema does not know may be removed too when the file has it — that is how a
    typo that makes every other command fail gets repaired. Keys in the ``[profiles]`` and
    ``[plugins]`` tables go through :mod:`bridgecli.config_tables` instead.
    """
    path = paths.config_file()
    data = read_file(path)
    section, _, name = key.partition(".")
    body = data.get(section)
    if key not in SETTINGS:
        present = (name and isinstance(body, dict) and name in body) or (
            not name and section in data and not isinstance(body, dict)
        )
        if section in FREE_FORM_SECTIONS or not present:
            raise ConfigError(
                f"unknown configuration key {key!r}, and not a key in {path}",
                f"{unknown_key_hint(key)} {SHOW_LISTS_KEYS}",
            )
    elif not isinstance(body, dict) or name not in body:
        return False
    if name and isinstance(body, dict):  # always a table here: checked above
        del body[name]
        if not body:
            del data[section]
    else:
        del data[section]
    write_file(path, data)
    return True
