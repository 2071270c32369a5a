"""bridge's hooks in an agent client's settings: which events run ``bridge hook``, and the edits.

Claude Code (``~/.claude/settings.json``), Gemini CLI (``~/.gemini/settings.json``) and Codex
(``$CODEX_HOME/hooks.json``) run a command at a prompt's submission, a turn's end and a
permission prompt; bridge's hooks report them (:mod:`bridgecli.hooks`). As with the MCP
entry (:mod:`bridgecli.clients`), only bridge's own hooks are added, updated or removed;
every other key and hook stays, the file is backed up and written atomically, and a file
that does not parse is refused with nothing written.
"""

from __future__ import annotations

import copy
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridgecli import clients
from bridgecli.errors import ConfigError, MissingDependency


@dataclass(frozen=True)
class HookTable:
    """One client's hook settings: the ``bridge hook`` event each of its events runs, and the
    per-hook timeout in the client's unit (a safety net: the hook gives up after 0.5 s). The
    file is ``settings.json`` in the client's config dir."""

    client: str
    events: dict[str, str]  # client's event name -> bridge hook event
    timeout: int
    name: str = "settings.json"
    #: what the user must do before the client runs them, if anything
    note: str | None = None

    def file(self) -> Path:
        return clients.CLIENTS[self.client].config_dir() / self.name


TABLES: dict[str, HookTable] = {
    t.client: t
    for t in (
        HookTable(
            "claude-code",
            # StopFailure: a turn an API error ended, which runs no Stop
            {"UserPromptSubmit": "prompt", "Stop": "stop", "StopFailure": "stop", "Notification": "notify"},
            5,  # seconds
        ),
        HookTable(
            "gemini",
            {"BeforeAgent": "prompt", "AfterAgent": "stop", "Notification": "notify"},
            5000,  # milliseconds
        ),
        HookTable(
            "codex",
            {"UserPromptSubmit": "prompt", "Stop": "stop", "PermissionRequest": "notify"},
            5,  # seconds
            "hooks.json",
            "Codex runs them only once trusted: open /hooks in Codex and trust bridge's hooks",
        ),
    )
}


def supported(client: clients.Client) -> bool:
    """Whether bridge installs hooks for ``client`` (docs/hooks.md says why not for others)."""
    return client.name in TABLES


def commands(client: str, program: Path | str) -> dict[str, str]:
    """The command each of the client's events runs: ``/abs/bridge hook CLIENT EVENT``."""
    run = shlex.quote(str(program))
    return {name: f"{run} hook {client} {event}" for name, event in TABLES[client].events.items()}


def is_ours(command: Any, client: str) -> bool:
    """Whether a hook's ``command`` is a ``bridge hook CLIENT …`` (any installation of bridge)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return (
        len(words) == 4
        and os.path.basename(words[0]) in ("bridge", "bridgecli")
        and words[1:3] == ["hook", client]
        and words[3] in TABLES[client].events.values()
    )


def _table(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    hooks = data.get("hooks")
    if hooks is None:
        return {}
    if not isinstance(hooks, dict):
        raise ConfigError(
            f"{path}: 'hooks' is a {type(hooks).__name__}, not an object", "fix the file by hand; nothing was written"
        )
    for event, groups in hooks.items():
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise ConfigError(
                f"{path}: hooks.{event} is not a list of objects", "fix the file by hand; nothing was written"
            )
    return hooks


def _without_ours(groups: list[dict[str, Any]], client: str) -> list[dict[str, Any]]:
    """``groups`` with bridge's hooks taken out; a group left with no hook is dropped."""
    kept = []
    for group in groups:
        inner = group.get("hooks")
        if not isinstance(inner, list):
            kept.append(group)
            continue
        rest = [h for h in inner if not (isinstance(h, dict) and is_ours(h.get("command"), client))]
        if len(rest) == len(inner):
            kept.append(group)
        elif rest:
            kept.append({**group, "hooks": rest})
    return kept


def _ours(groups: list[dict[str, Any]], client: str) -> list[dict[str, Any]]:
    return [
        h for g in groups for h in (g.get("hooks") or []) if isinstance(h, dict) and is_ours(h.get("command"), client)
    ]


def _edit(
    client: clients.Client, data: dict[str, Any], path: Path, install: bool
) -> tuple[dict[str, str], dict[str, str]]:
    """Put bridge's hooks into (or take them out of) ``data`` in place; returns the commands
    wanted per event and those of bridge's hooks that were there before."""
    table = TABLES[client.name]
    hooks = _table(path, data)
    wanted = commands(client.name, clients.bridge_program()) if install else {}
    had: dict[str, str] = {}
    for name in table.events:
        old = hooks.get(name, [])
        mine = _ours(old, client.name)
        if mine:
            had[name] = mine[0]["command"]
        ours = [{"type": "command", "command": wanted[name], "timeout": table.timeout}] if install else []
        if mine == ours:
            continue  # already as wanted: left where it is
        new = _without_ours(old, client.name) + ([{"hooks": ours}] if ours else [])
        if new:
            hooks[name] = new
        else:
            hooks.pop(name, None)
    if hooks:
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)
    return wanted, had


def plan(client: clients.Client, install: bool, base: clients.Change | None = None) -> clients.Change:
    """Work out adding (``install``) or removing bridge's hooks in the client's user settings.

    When ``base`` (the MCP entry's change) edits the same file, the hooks are edited into its
    data, so that one write carries both."""
    path = clients.real_path(TABLES[client.name].file())
    shared = base is not None and Path(base.file) == path
    data = base.data if shared and base is not None else clients.read(client, path, toml=False)
    before = copy.deepcopy(data.get("hooks"))
    wanted, had = _edit(client, data, path, install)
    if data.get("hooks") == before:
        action = "unchanged"
    else:
        action = "removed" if not install else ("updated" if had else "added")
    mode = base.mode if shared and base is not None else clients.file_mode(path, "user")
    entry = (wanted if install else had) or None
    return clients.Change(client.name, str(path), action, entry, data, mode, part="hooks")


@dataclass
class Installed:
    """bridge's hooks found in a client's settings, and what is wrong with them (if anything)."""

    client: str
    file: str
    problem: str | None


def configured() -> list[Installed]:
    """The clients whose settings run ``bridge hook``; a missing event, another bridge or a
    file that cannot be read is a problem (reported, never raised)."""
    try:
        mine: str | None = str(clients.bridge_program())
    except MissingDependency:
        mine = None
    found = []
    for name, table in TABLES.items():
        path = table.file()
        try:
            path = clients.real_path(path)
            hooks = _table(path, clients.read(clients.CLIENTS[name], path, toml=False))
        except ConfigError as exc:
            if path.exists():
                found.append(Installed(name, str(path), str(exc)))
            continue
        ran = {
            event: h.get("command")
            for event, groups in hooks.items()
            for g in groups
            for h in (g.get("hooks") or [])
            if isinstance(h, dict) and is_ours(h.get("command"), name)
        }
        if ran:
            found.append(Installed(name, str(path), _problem(table, ran, mine)))
    return found


def _problem(table: HookTable, ran: dict[str, Any], mine: str | None) -> str | None:
    missing = [event for event in table.events if event not in ran]
    if missing:
        return f"no bridge hook for {', '.join(missing)}"
    for command in ran.values():
        program = shlex.split(command)[0]
        if not os.path.exists(program):
            return f"the hooks run {program}, which does not exist"
        if mine and os.path.realpath(program) != os.path.realpath(mine):
            return f"the hooks run {program}, not this installation's {mine}"
    return None
