"""Disposable JSON caches that TAB completion reads without opening any connection.

* ``roster.json``: the gateway's union roster view, rewritten on each heartbeat
  (:func:`save_roster`), so a TAB offers labels, gids and hosts while the gateway is busy or
  stopped.
* ``browser.json``: browser targets and tab groups, rewritten by ``bridge browser
  targets``/``tabs``/``open`` (:func:`update_browser`), so a TAB needs no WebSocket handshake.

Both live in ``paths.cache_dir()`` and are written atomically. Reads and writes never raise:
a stale or missing cache costs a poorer completion, never a failure. Standard library only.
"""

from __future__ import annotations

import os
import time

from bridgecli import paths, wirejson

TYPE_CHECKING = False  # typing and pathlib cost a TAB more than reading the cache does
if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path
    from typing import Any

ROSTER = "roster.json"
BROWSER = "browser.json"


def path(name: str) -> Path:
    """Where cache ``name`` lives."""
    return paths.cache_dir() / name


def read(name: str) -> dict[str, Any]:
    """The cached object, or ``{}`` when it is missing, unreadable or not a JSON object."""
    try:
        with open(os.path.join(paths.dir_text("cache"), name), encoding="utf-8") as handle:
            data = wirejson.loads(handle.read())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write(name: str, data: dict[str, Any]) -> bool:
    """Replace cache ``name`` atomically; False (and nothing changed) when it cannot be written."""
    import tempfile  # here, not at the top: a TAB only reads

    target = path(name)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                # one dumps + one write: json.dump to a file uses the pure-Python encoder
                handle.write(wirejson.dumps_compact({**data, "written": time.time()}))
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return False
    return True


def save_roster(view: Any) -> bool:
    """Write a :class:`bridgecli.roster.RosterView` as ``roster.json`` (called per heartbeat)."""
    # a shallow copy per entry: dataclasses.asdict deep-copies every field (7x slower here)
    return write(
        ROSTER,
        {
            "entries": [dict(e.__dict__) for e in view.entries()],
            "gateways": [dict(g.__dict__) for g in view.gateways()],
        },
    )


def update_browser(
    *,
    targets: Iterable[dict[str, Any]] | None = None,
    groups: Iterable[str] | None = None,
    add_group: str | None = None,
) -> bool:
    """Record what a browser command just learnt: the full target list, the full group list,
    or one group it opened. Concurrent updates may lose one group name (last writer wins):
    acceptable for a completion cache, and the next ``bridge browser tabs`` repairs it."""
    data = read(BROWSER)
    if targets is not None:
        data["targets"] = [{"id": str(t.get("id", "")), "label": str(t.get("label", ""))} for t in targets]
    known = [g for g in data.get("groups", []) if isinstance(g, str)]
    if groups is not None:
        known = sorted({str(g) for g in groups})
    if add_group and add_group not in known:
        known = sorted([*known, add_group])
    data["groups"] = known
    data.pop("written", None)
    return write(BROWSER, data)
