"""Which label a ``bridge mcp`` session serves: one per working directory, one session per label.

Without ``--label`` the label is the directory's name plus a short hash of its path, so the
next session there re-attaches and collects what was held for the last one. A live session
holds its label (an exclusive ``flock`` in the runtime dir, gone with the process); another
one takes the lowest free slot, ``LABEL-2``, ``LABEL-3`` …. Slots are reused, so sessions
that start and stop (a client's health check) never pile up entities. Decided locally, so
it works before the gateway is up.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import IO

from bridgecli.hoststate.entities import validate_label

LABEL_MAX = 64
#: the directory part of a derived label; the hash (and any slot suffix) keeps it unique
SLUG_MAX = 40
HASH_CHARS = 6


def directory_label(path: Path) -> str:
    """``NAME-HASH`` for directory ``path`` (resolved): NAME its base name made fit for a
    label, HASH the first hex digits of SHA-256 of its absolute path. Stable per directory,
    distinct for two directories of the same name."""
    path = path.resolve()
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.name).lstrip("_.-")[:SLUG_MAX].rstrip("-") or "root"
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:HASH_CHARS]
    return f"{slug}-{digest}"


def slot_label(base: str, slot: int) -> str:
    """The label of ``slot`` (1-based): ``base`` itself, else ``base-N`` (cut to fit 64)."""
    if slot == 1:
        return base
    suffix = f"-{slot}"
    return f"{base[: LABEL_MAX - len(suffix)]}{suffix}"


@dataclass
class Claim:
    """The label this session serves, and the lock that keeps it this session's own."""

    label: str
    base: str  #: the label asked for (``--label``) or derived from the directory
    pinned: bool  #: ``--label`` was given
    handle: IO[str]  #: the open, locked file; closing it (or dying) frees the label
    taken_by: str = ""  #: pid of the session serving ``base`` when this one fell back to a slot

    @property
    def note(self) -> str:
        """One sentence on why the label is not ``base`` ("" when it is)."""
        if self.label == self.base:
            return ""
        whose = "the label you pinned with --label" if self.pinned else "this directory's label"
        return (
            f"{whose}, {self.base!r}, is served by another live bridge mcp session (pid {self.taken_by or '?'}), "
            f"so this session is {self.label!r}."
        )

    def release(self) -> None:
        self.handle.close()


def _try_lock(label: str) -> tuple[IO[str] | None, str]:
    """Lock the label's file: (the open handle, "") or (None, the holder's pid)."""
    from bridgecli import paths

    directory = paths.ensure_private_dir(paths.runtime_dir())
    handle = open(directory / f"mcp-label-{label}.lock", "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        return None, holder
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle, ""


def claim(label: str | None, cwd: Path | None = None) -> Claim:
    """Take the lowest free slot of ``label`` (``--label``; None: derive from ``cwd``).

    Raises :class:`~bridgecli.errors.ConfigError` for a malformed ``--label`` only."""
    base = validate_label(label) if label else directory_label(cwd or Path.cwd())
    taken_by = ""
    for slot in count(1):
        name = slot_label(base, slot)
        handle, holder = _try_lock(name)
        if handle is not None:
            return Claim(name, base, label is not None, handle, taken_by)
        if slot == 1:
            taken_by = holder
    raise AssertionError("unreachable")  # pragma: no cover — count() never ends


__all__ = ["Claim", "claim", "directory_label", "slot_label"]
