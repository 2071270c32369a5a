"""Persisted group registry and stable executor ids for the CDP executor.

CDP has no tab groups, so the executor owns the mapping group → target ids itself. It is
kept in a JSON file under the user state dir, keyed by executor id, so that a restarted
executor attached to the same Chromium (and a new broker after failover, through the
``tabs`` answer) still knows which tabs belong to which group.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bridgecli import paths


def _dir() -> Path:
    return paths.ensure_private_dir(paths.state_dir() / "browser")


def _write_json(path: Path, data: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (FileNotFoundError, ValueError):
        return {}


def stable_executor_id(label: str) -> str:
    """The executor id for ``label`` on this host: minted once, then reused, so a browser
    keeps its identity (and ``--target`` by id keeps working) across restarts."""
    path = _dir() / "cdp-executors.json"
    ids = _read_json(path)
    if label not in ids:
        ids[label] = "cdp-" + uuid.uuid4().hex[:12]
        _write_json(path, ids)
    return ids[label]


class GroupRegistry:
    """group → {"tabs": [target ids], "active": target id}; every change is written through."""

    def __init__(self, executor_id: str) -> None:
        self.path = _dir() / f"cdp-groups-{executor_id}.json"
        self._lock = threading.Lock()
        self.groups: dict[str, dict[str, Any]] = {
            name: {"tabs": list(g.get("tabs", [])), "active": g.get("active")}
            for name, g in _read_json(self.path).items()
            if isinstance(g, dict)
        }

    def _save(self) -> None:
        _write_json(self.path, self.groups)

    def prune(self, live: Iterable[str]) -> None:
        """Forget tabs that no longer exist (closed while we were away) and empty groups."""
        alive = set(live)
        with self._lock:
            for name in list(self.groups):
                group = self.groups[name]
                group["tabs"] = [t for t in group["tabs"] if t in alive]
                if group["active"] not in group["tabs"]:
                    group["active"] = group["tabs"][-1] if group["tabs"] else None
                if not group["tabs"]:
                    del self.groups[name]
            self._save()

    def add(self, group: str, target_id: str) -> None:
        with self._lock:
            entry = self.groups.setdefault(group, {"tabs": [], "active": None})
            entry["tabs"].append(target_id)
            entry["active"] = target_id
            self._save()

    def remove_tab(self, target_id: str) -> str | None:
        """Drop one tab wherever it is; returns its group."""
        with self._lock:
            for name, group in list(self.groups.items()):
                if target_id in group["tabs"]:
                    group["tabs"].remove(target_id)
                    if group["active"] == target_id:
                        group["active"] = group["tabs"][-1] if group["tabs"] else None
                    if not group["tabs"]:
                        del self.groups[name]
                    self._save()
                    return name
        return None

    def tabs(self, group: str) -> list[str]:
        with self._lock:
            return list(self.groups.get(group, {}).get("tabs", []))

    def active(self, group: str) -> str | None:
        with self._lock:
            return self.groups.get(group, {}).get("active")

    def set_active(self, group: str, target_id: str) -> None:
        with self._lock:
            if group in self.groups and target_id in self.groups[group]["tabs"]:
                self.groups[group]["active"] = target_id
                self._save()

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self.groups)
