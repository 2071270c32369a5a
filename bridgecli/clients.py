"""The agent clients ``bridge install`` configures: where each keeps its MCP servers, and how.

A table of data (names, files, formats, detection) plus small readers and writers. Every
edit reads the whole file, changes only bridge's entry, backs the file up and writes it
atomically, because these files hold the user's other servers and settings (Claude Code's
also holds its own state).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridgecli.errors import ConfigError, MissingDependency, NotFound

#: the name of bridge's entry in every client's server table
ENTRY_NAME = "bridge"
#: Codex's default tool timeout (60 s) is shorter than a useful ``wait`` on bridge_send
CODEX_TOOL_TIMEOUT = 900
#: keys of a remote (URL) server in any client's format: an earlier ``bridge`` entry's transport
#: is dropped, because a client prefers ``url``/``httpUrl`` to ``command`` (Gemini) or runs
#: what ``type`` says (Claude Code), so a kept one would shadow the command we write
TRANSPORT_KEYS = frozenset(
    {
        "type",
        "url",
        "httpUrl",
        "tcp",
        "headers",
        "transport",
        "oauth",
        "http_headers",
        "env_http_headers",
        "bearer_token",
        "bearer_token_env_var",
    }
)


#: a TOML table header line, and one of bridge's own tables (``[mcp_servers.bridge]`` and below)
_TOML_HEADER = re.compile(r"^\s*\[")
_BRIDGE_HEADER = re.compile(r"""^\s*\[\s*mcp_servers\s*\.\s*(?:bridge|"bridge"|'bridge')\s*[.\]]""")


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def _xdg_config() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or _home() / ".config")


def _codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or _home() / ".codex")


@dataclass(frozen=True)
class Client:
    """One agent client: its programs, config dir, user and project files and entry style.

    ``style`` is ``servers`` (``mcpServers.NAME = {command, args}``), ``opencode``
    (``mcp.NAME = {type: local, command: [...], enabled}``) or ``codex`` (TOML
    ``[mcp_servers.NAME]``).
    """

    name: str
    title: str
    programs: tuple[str, ...]
    config_dir: Callable[[], Path]
    user_file: Callable[[], Path]
    project_file: str | None
    style: str

    @property
    def table_key(self) -> str:
        return {"servers": "mcpServers", "opencode": "mcp", "codex": "mcp_servers"}[self.style]

    @property
    def is_toml(self) -> bool:
        return self.style == "codex"

    def file(self, scope: str, cwd: Path | None = None) -> Path:
        """The file ``scope`` (user or project) edits; ``project`` is relative to ``cwd``."""
        if scope == "user":
            return self.user_file()
        if self.project_file is None:
            raise ConfigError(
                f"{self.name} has no project config file, only {self.user_file()}",
                f"use --scope user for {self.name}",
            )
        return (cwd or Path.cwd()) / self.project_file

    def found(self) -> bool:
        """Installed on this host: a program on PATH, its config dir or its user file exists."""
        return any(shutil.which(p) for p in self.programs) or self.config_dir().is_dir() or self.user_file().exists()

    def entry(self, command: list[str]) -> dict[str, Any]:
        """bridge's entry in this client's format, running ``command`` (absolute path first)."""
        if self.style == "opencode":
            return {"type": "local", "command": list(command), "enabled": True}
        entry: dict[str, Any] = {"command": command[0], "args": list(command[1:])}
        if self.style == "codex":
            entry["tool_timeout_sec"] = CODEX_TOOL_TIMEOUT
        return entry

    def command_of(self, entry: Any) -> str | None:
        """The program an existing entry runs, or None when the entry has none."""
        if not isinstance(entry, dict):
            return None
        command = entry.get("command")
        if self.style == "opencode":
            return command[0] if isinstance(command, list) and command and isinstance(command[0], str) else None
        return command if isinstance(command, str) else None


CLIENTS: dict[str, Client] = {
    c.name: c
    for c in (
        Client(
            "claude-code",
            "Claude Code",
            ("claude",),
            lambda: _home() / ".claude",
            lambda: _home() / ".claude.json",
            ".mcp.json",
            "servers",
        ),
        Client("codex", "Codex", ("codex",), _codex_home, lambda: _codex_home() / "config.toml", None, "codex"),
        Client(
            "opencode",
            "OpenCode",
            ("opencode",),
            lambda: _xdg_config() / "opencode",
            lambda: _xdg_config() / "opencode" / "opencode.json",
            "opencode.json",
            "opencode",
        ),
        Client(
            "gemini",
            "Gemini CLI",
            ("gemini",),
            lambda: _home() / ".gemini",
            lambda: _home() / ".gemini" / "settings.json",
            ".gemini/settings.json",
            "servers",
        ),
        Client(
            "cursor",
            "Cursor",
            ("cursor-agent", "cursor"),
            lambda: _home() / ".cursor",
            lambda: _home() / ".cursor" / "mcp.json",
            ".cursor/mcp.json",
            "servers",
        ),
    )
}


def get(name: str) -> Client:
    """The client called ``name``; :class:`NotFound` lists the known ones."""
    try:
        return CLIENTS[name]
    except KeyError:
        raise NotFound(f"unknown client {name!r}", f"use one of: {', '.join(CLIENTS)} (or --all)") from None


def require_found(client: Client) -> None:
    """Raise :class:`MissingDependency` unless ``client`` is installed on this host."""
    if not client.found():
        raise MissingDependency(
            f"{client.title} ({client.name}) is not installed on this host: no "
            f"{' or '.join(client.programs)} on PATH and no {client.config_dir()}",
            f"install {client.title} first (or create {client.config_dir()}), then rerun",
        )


def bridge_program() -> Path:
    """This installation's ``bridge`` script (next to ``sys.executable``), never a ``bridge``
    found on PATH: Debian's iproute2 ships ``/usr/sbin/bridge``."""
    here = Path(sys.executable).parent
    for name in ("bridge", "bridgecli"):
        if (here / name).is_file():
            return (here / name).absolute()
    raise MissingDependency(
        f"no bridge script next to {sys.executable}",
        "run `bridge install` with the bridge of the installation the clients should use",
    )


def mcp_command(label: str | None = None, role: str | None = None) -> list[str]:
    """The command line each entry runs: ``/abs/bridge mcp [--label L] [--role R]``."""
    command = [str(bridge_program()), "mcp"]
    if label:
        command += ["--label", label]
    if role:
        command += ["--role", role]
    return command


def real_path(path: Path) -> Path:
    """The file to edit for ``path``: a symlink is followed (the link stays, its target is
    edited, as dotfile managers expect); a dangling link or a non-file is refused."""
    if path.is_symlink():
        target = path.resolve()
        if not target.exists():
            raise ConfigError(
                f"{path} is a symlink to {target}, which does not exist",
                "create the target or remove the link, then rerun",
            )
        path = target
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path} is not a regular file", "move it away, then rerun")
    return path


def read(client: Client, path: Path, toml: bool | None = None) -> dict[str, Any]:
    """The parsed file (``{}`` when absent or blank), TOML when ``toml`` (default: the
    client's format); a parse error or a top level that is not an object is a
    :class:`ConfigError` naming the path and line."""
    if not path.exists():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", "fix its permissions or encoding; nothing was written") from exc
    if not text.strip():
        return {}
    if client.is_toml if toml is None else toml:
        import tomllib

        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}", "fix the file; nothing was written") from exc
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path} is not valid JSON: {exc.msg} (at line {exc.lineno}, column {exc.colno})",
                "fix the file; nothing was written",
            ) from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the top level is a {type(data).__name__}, not an object",
            "fix or move the file; nothing was written",
        )
    return data


def servers(client: Client, path: Path, data: dict[str, Any]) -> dict[str, Any] | None:
    """The file's server table (None when absent); one that is not an object is refused."""
    table = data.get(client.table_key)
    if table is not None and not isinstance(table, dict):
        raise ConfigError(
            f"{path}: {client.table_key!r} is a {type(table).__name__}, not an object",
            "fix the file by hand; nothing was written",
        )
    return table


@dataclass
class Change:
    """What ``install``/``uninstall`` does (or would do) to one client's file."""

    client: str
    file: str
    action: str  # added | updated | removed | unchanged
    entry: Any
    data: dict[str, Any]
    mode: int
    backup: str | None = None
    part: str = "mcp"  # what is edited: bridge's MCP entry, or its hooks (bridgecli.client_hooks)

    @property
    def changed(self) -> bool:
        return self.action != "unchanged"

    def as_dict(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "file": self.file,
            "action": self.action,
            "changed": self.changed,
            "entry": self.entry,
            "backup": self.backup,
            "part": self.part,
        }


def file_mode(path: Path, scope: str) -> int:
    """The mode a rewrite keeps: the file's own, else private for a user file."""
    if path.exists():
        return stat.S_IMODE(path.stat().st_mode)
    return 0o600 if scope == "user" else 0o644


def plan_install(client: Client, scope: str, command: list[str], cwd: Path | None = None) -> Change:
    """Read the file and work out bridge's entry: ours are set, keys the user added to it
    (e.g. ``env``) are kept, those of a remote transport (:data:`TRANSPORT_KEYS`) dropped."""
    path = real_path(client.file(scope, cwd))
    data = read(client, path)
    table = servers(client, path, data)
    old = (table or {}).get(ENTRY_NAME)
    kept = {k: v for k, v in old.items() if k not in TRANSPORT_KEYS} if isinstance(old, dict) else {}
    new = {**kept, **client.entry(command)}
    action = "unchanged" if new == old else ("updated" if old is not None else "added")
    if action != "unchanged":
        data.setdefault(client.table_key, {})[ENTRY_NAME] = new
    return Change(client.name, str(path), action, new, data, file_mode(path, scope))


def plan_uninstall(client: Client, scope: str, cwd: Path | None = None) -> Change:
    """Read the file and drop bridge's entry only (an emptied table stays, as the user had it)."""
    path = real_path(client.file(scope, cwd))
    data = read(client, path)
    table = servers(client, path, data)
    if not table or ENTRY_NAME not in table:
        return Change(client.name, str(path), "unchanged", None, data, file_mode(path, scope))
    old = table.pop(ENTRY_NAME)
    return Change(client.name, str(path), "removed", old, data, file_mode(path, scope))


def _backup(path: Path, mode: int) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.bridge-backup-{stamp}")
    n = 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.bridge-backup-{stamp}-{n}")
    from bridgecli.config_edit import atomic_write

    atomic_write(backup, path.read_bytes(), mode)
    return backup


def apply(change: Change) -> None:
    """Back the file up (when it exists) and write ``change.data`` atomically, same mode."""
    if not change.changed:
        return
    from bridgecli.config_edit import atomic_write

    path = Path(change.file)
    if path.exists():
        change.backup = str(_backup(path, change.mode))
    if CLIENTS[change.client].is_toml and change.part == "mcp":  # hooks files are JSON
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        payload = toml_text(old, change.data, change.entry if change.action != "removed" else None).encode()
    else:
        payload = (json.dumps(change.data, indent=2, ensure_ascii=False) + "\n").encode()
    atomic_write(path, payload, change.mode)


def toml_text(old: str, data: dict[str, Any], entry: Any) -> str:
    """``old`` with its ``[mcp_servers.bridge…]`` tables cut and ``entry`` (when given)
    appended, so the user's comments and layout survive; the whole of ``data`` rendered
    afresh when that text would not parse back to exactly ``data`` (e.g. an inline table)."""
    import tomllib

    import tomli_w

    keep: list[str] = []
    cut: list[str] | None = None  # the lines of the bridge table being cut, if one is
    for line in old.splitlines(keepends=True):
        if _TOML_HEADER.match(line):
            ours = bool(_BRIDGE_HEADER.match(line))
            if cut is not None and not ours:  # comments just above the next table are its own
                tail = len(cut)
                while tail and (not cut[tail - 1].strip() or cut[tail - 1].lstrip().startswith("#")):
                    tail -= 1
                keep += cut[tail:]
            cut = [] if ours else None
        (keep if cut is None else cut).append(line)
    text = "".join(keep).rstrip("\n")
    if entry is not None:
        section = tomli_w.dumps({"mcp_servers": {ENTRY_NAME: entry}})
        text = f"{text}\n\n{section}" if text else section
    elif text:
        text += "\n"
    wanted = {k: v for k, v in data.items() if not (k == "mcp_servers" and v == {})}
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        parsed = None
    if parsed is not None and {k: v for k, v in parsed.items() if k in data or v != {}} in (data, wanted):
        return text
    return tomli_w.dumps(data)


@dataclass
class Configured:
    """An entry for bridge found in a client's file, and what is wrong with it (if anything)."""

    client: str
    file: str
    command: str | None
    problem: str | None


def configured(cwd: Path | None = None) -> list[Configured]:
    """bridge entries in every client's user file and in ``cwd``'s project files; a file that
    cannot be read is reported as a problem, never raised."""
    mine = str(bridge_program()) if _has_program() else None
    found = []
    for client in CLIENTS.values():
        for scope in ("user", "project"):
            if scope == "project" and client.project_file is None:
                continue
            path = client.file(scope, cwd)
            try:
                path = real_path(path)
                table = servers(client, path, read(client, path)) or {}
            except ConfigError as exc:
                if path.exists() or path.is_symlink():
                    found.append(Configured(client.name, str(path), None, str(exc)))
                continue
            if ENTRY_NAME not in table:
                continue
            command = client.command_of(table[ENTRY_NAME])
            found.append(Configured(client.name, str(path), command, _problem(command, mine)))
    return found


def _has_program() -> bool:
    try:
        bridge_program()
    except MissingDependency:
        return False
    return True


def _problem(command: str | None, mine: str | None) -> str | None:
    if not command:
        return "the entry has no command"
    if not os.path.isabs(command):
        return f"runs {command!r} from PATH, which may be another program (e.g. iproute2's bridge)"
    if not os.path.exists(command):
        return f"runs {command}, which does not exist"
    if mine and os.path.realpath(command) != os.path.realpath(mine):
        return f"runs {command}, not this installation's {mine}"
    return None
