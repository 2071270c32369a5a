"""``bridge config`` on the ``[profiles.NAME]`` and ``[plugins.NAME]`` tables.

Reading the file keeps these tables as they are (a launcher or plugin may be missing on this
host), but ``bridge config set`` checks every key and value against what is declared: the
keys every profile has (:data:`PROFILE_SETTINGS`), the keys each launcher declares through
``register_profile_settings`` and each plugin's ``[plugins.NAME]`` keys declared through
``register_plugin_settings`` — so a typo is refused when it is written, not when a spawn or a
delivery fails later on some host.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bridgecli import agent_kinds, config, config_edit, paths
from bridgecli.agent_kinds import DEFAULT_LAUNCHER, KIND_NAMES
from bridgecli.config import FREE_FORM_SECTIONS, Config, Setting
from bridgecli.errors import BridgeError, ConfigError, PluginError
from bridgecli.hoststate.entities import LABEL_RE, ROLES


def _label(value: str) -> str:
    if not LABEL_RE.match(value):
        raise ValueError("a label of 1-64 letters, digits and _ . @ - starting with a letter or digit")
    return value


def _prompt_args(value: list[str]) -> list[str]:
    try:
        agent_kinds.check_prompt_args(value, "prompt_args")
    except ConfigError as exc:
        raise ValueError(f"{exc.message.removeprefix('prompt_args: ')}; {exc.hint}") from None
    return value


def _prompt(value: str) -> str:
    try:
        agent_kinds.check_prompt(value)
    except BridgeError as exc:
        raise ValueError(exc.message) from None
    return value


#: The keys of every profile, whatever its launcher (the gateway reads them itself).
PROFILE_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "launcher",
        str,
        DEFAULT_LAUNCHER,
        "Launcher that starts the profile (`bridge plugins` lists the installed ones; an agent kind's: tmux).",
    ),
    Setting(
        "agent",
        str,
        None,
        "Built-in agent kind whose command, launcher (tmux), ready_pattern and prompt_args the profile starts from.",
        choices=KIND_NAMES,
    ),
    Setting("command", list, None, "What to run: a string for the shell, or a list of strings run as is."),
    Setting(
        "prompt_args",
        list,
        None,
        'Arguments that carry a first prompt after command: ["--", "{prompt}"] or ["--flag={prompt}"].',
        check=_prompt_args,
    ),
    Setting(
        "prompt", str, None, "First prompt when spawn gets no --prompt (needs agent or prompt_args).", check=_prompt
    ),
    Setting("cwd", str, None, "Working directory of the command."),
    Setting("env", dict, None, "Extra environment variables: set one with profiles.NAME.env.VAR."),
    Setting("label", str, None, "Label of the new entity (default NAME-xxxxxx; spawn --label wins).", check=_label),
    Setting("role", str, "agent", "Role of the new entity.", choices=ROLES),
    Setting(
        "ready_timeout",
        float,
        30.0,
        "Seconds the launcher may take to get ready when spawn gets no --wait-ready.",
        check=config.non_negative,
    ),
)
COMMON = {s.key: s for s in PROFILE_SETTINGS}


@dataclass(frozen=True)
class TableKey:
    """A parsed ``profiles.NAME.KEY[.ENTRY]`` or ``plugins.NAME.KEY`` with its declaration
    (whose ``key`` is the full dotted key, so parse errors name it)."""

    section: str
    table: str
    name: str
    entry: str | None
    setting: Setting

    @property
    def key(self) -> str:
        return ".".join(p for p in (self.section, self.table, self.name, self.entry) if p)


def is_table_key(key: str) -> bool:
    """Whether ``key`` lies in a ``[profiles.*]`` or ``[plugins.*]`` table."""
    return key.split(".", 1)[0] in FREE_FORM_SECTIONS


def _hint(name: str, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, valid, n=3, cutoff=0.6)
    return ("did you mean " + " or ".join(close) + "? " if close else "") + "valid keys: " + ", ".join(valid)


class Declarations:
    """The declared keys of profiles (per launcher) and of plugin tables.

    Built from the loaded plugins' ``register_profile_settings`` / ``register_plugin_settings``
    targets; a target is imported on first use, so one broken declaration only affects its
    own table.
    """

    def __init__(
        self,
        launchers: Sequence[str],
        profile_targets: Mapping[str, tuple[str, str]],
        plugin_targets: Mapping[str, tuple[str, str]],
        resolve: Callable[[str], Any],
    ) -> None:
        self.launchers = sorted(launchers)
        self.profile_targets = dict(profile_targets)  # launcher -> (plugin, "module:attr")
        self.plugin_targets = dict(plugin_targets)  # table -> (plugin, "module:attr")
        self._resolve = resolve
        self._cache: dict[tuple[str, str], dict[str, Setting]] = {}

    @classmethod
    def from_plugins(cls, loaded: Any) -> Declarations:
        """From a :class:`bridgecli.plugins.Plugins`."""
        from bridgecli.plugins import resolve_target

        return cls(
            list(loaded.providers["launchers"]),
            loaded.providers["profile_settings"],
            loaded.providers["plugin_settings"],
            resolve_target,
        )

    def _load(self, kind: str, name: str, owner: str, target: Any) -> dict[str, Setting]:
        if (kind, name) not in self._cache:
            what = f"plugin {owner}: {kind} settings of {name!r}"
            declared = self._resolve(target) if isinstance(target, str) else None
            if not isinstance(declared, (list, tuple)) or not all(isinstance(s, Setting) for s in declared):
                raise PluginError(
                    f"{what}: {target!r} is not a list of bridgecli.config.Setting",
                    "this is a bug in that plugin; report it, or edit bridge.toml by hand",
                )
            table: dict[str, Setting] = {}
            for s in declared:
                if not s.key or "." in s.key or s.key in table or (kind == "profile" and s.key in COMMON):
                    raise PluginError(
                        f"{what}: bad or repeated key {s.key!r}",
                        "this is a bug in that plugin; report it, or edit bridge.toml by hand",
                    )
                table[s.key] = s
            self._cache[(kind, name)] = table
        return self._cache[(kind, name)]

    def launcher_keys(self, launcher: str) -> dict[str, Setting]:
        """The keys a profile with this launcher may have: the common ones plus its own."""
        if launcher not in self.launchers:
            raise ConfigError(
                f"launcher {launcher!r} is not installed (installed: {', '.join(self.launchers)})",
                "install the plugin that provides it (see `bridge plugins`), or "
                "set the profile's launcher to an installed one",
            )
        if launcher not in self.profile_targets:
            return dict(COMMON)
        owner, target = self.profile_targets[launcher]
        return {**COMMON, **self._load("profile", launcher, owner, target)}

    def plugin_keys(self, table: str) -> dict[str, Setting]:
        """The keys of ``[plugins.TABLE]``."""
        if table not in self.plugin_targets:
            known = ", ".join(sorted(self.plugin_targets)) or "none"
            raise ConfigError(
                f"no installed plugin declares settings [plugins.{table}] (declared: {known})",
                "check the name, or install the plugin (see `bridge plugins`)",
            )
        owner, target = self.plugin_targets[table]
        return self._load("plugin", table, owner, target)

    def launchers_taking(self, name: str) -> list[str]:
        """Installed launchers whose profiles take key ``name`` (for error hints)."""
        found = []
        for launcher in self.launchers:
            try:
                if name in self.launcher_keys(launcher):
                    found.append(launcher)
            except BridgeError:
                continue
        return found

    # --- keys ------------------------------------------------------------------------

    def parse_key(self, key: str, tables: Mapping[str, Any]) -> TableKey:
        """Resolve ``key`` against the declarations; ``tables`` (the file's ``profiles`` and
        ``plugins`` tables) says which launcher a profile uses. Raises ConfigError naming the
        problem and what to write instead."""
        parts = key.split(".")
        section = parts[0]
        example = "profiles.dev.command" if section == "profiles" else "plugins.tmux.socket"
        if len(parts) < 3 or not all(parts):
            raise ConfigError(
                f"{key!r} is not a key of a [{section}.NAME] table",
                f"name one key as {section}.NAME.KEY, e.g. {example}",
            )
        table, name, rest = parts[1], parts[2], parts[3:]
        if section == "profiles":
            profile = tables.get("profiles", {}).get(table, {})
            launcher = agent_kinds.launcher_of(profile)
            if name in COMMON:
                keys = COMMON
            else:
                keys = self.launcher_keys(launcher)
                if name not in keys:
                    raise ConfigError(
                        f"profile {table!r} (launcher {launcher}) has no key {name!r}",
                        self._other_launchers_hint(table, name) + _hint(name, list(keys)),
                    )
        else:
            keys = self.plugin_keys(table)
            if name not in keys:
                raise ConfigError(f"[plugins.{table}] has no key {name!r}", _hint(name, list(keys)))
        setting = keys[name]
        full = f"{section}.{table}.{name}"
        if setting.type is dict and len(rest) == 1:
            entry = Setting(f"{full}.{rest[0]}", str, None, setting.help)
            return TableKey(section, table, name, rest[0], entry)
        if rest and setting.type is dict:
            raise ConfigError(f"{key!r}: name one entry of {full}", f"use {full}.NAME")
        if rest:
            raise ConfigError(f"{key!r}: {full} has no entries", f"use {full}")
        return TableKey(section, table, name, None, dataclasses.replace(setting, key=full))

    def _other_launchers_hint(self, table: str, name: str) -> str:
        others = self.launchers_taking(name)
        if not others:
            return ""
        return f"{name} belongs to launcher {' or '.join(others)}: set profiles.{table}.launcher first; "

    # --- commands --------------------------------------------------------------------

    def set_value(self, key: str, raw: str) -> Any:
        """Validate and store ``key = raw`` in the file (one atomic write; every other key
        kept). Setting a profile's ``launcher`` also checks that the profile's other keys suit
        the new launcher."""
        path = paths.config_file()
        data = config.read_file(path)
        config.flatten(data, path)  # refuse to rewrite a file that is already invalid
        where = f"bridge config set (not written to {path})"
        target = self.parse_key(key, data)
        value = target.setting.parse(raw, where)
        table = data.get(target.section, {}).get(target.table, {})
        if target.section == "profiles" and target.name in ("launcher", "agent"):
            launcher = agent_kinds.launcher_of({**table, target.name: value})
            # an agent kind's launcher is checked only when the profile has keys to check
            own = target.name == "launcher" or any(k not in COMMON for k in table)
            keys = self.launcher_keys(launcher) if own else COMMON
            stray = [k for k in table if k not in keys]
            if stray:
                raise ConfigError(
                    f"{where}: launcher {launcher} does not take key(s) {', '.join(stray)} of profile {target.table!r}",
                    f"remove them first with `bridge config unset profiles.{target.table}.KEY`",
                )
        data.setdefault(target.section, {}).setdefault(target.table, {})
        table = data[target.section][target.table]
        if target.entry is not None:
            if not isinstance(table.get(target.name), dict):
                table[target.name] = {}
            table[target.name][target.entry] = value
        else:
            table[target.name] = value
        config_edit.write_file(path, data)
        return value

    def get_value(self, key: str, cfg: Config) -> tuple[Any, str]:
        """The value of a (declared) table key and where it comes from: the file, else the
        declared default."""
        target = self.parse_key(key, cfg.tables)
        table = cfg.tables.get(target.section, {}).get(target.table, {})
        sources: Mapping[str, str] = {}
        if target.section == "profiles":
            profile = _merged(target.table, table)
            table, sources = (profile.table, profile.sources) if profile else (table, {})
        value = table.get(target.name, _MISSING)
        if target.entry is not None:
            value = value.get(target.entry, _MISSING) if isinstance(value, dict) else _MISSING
        if value is _MISSING:
            return target.setting.default, "default"
        source = sources.get(target.name, "file")
        return value, str(cfg.path) if source == "file" else source

    def rows(self, cfg: Config) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
        """What ``bridge config show`` lists: every key of every profile, every declared key
        of every installed plugin's table (with its default when unset), and the keys of
        tables nobody declares. Returns ``(rows, problems)``; a problem is ``(key, why)``
        for a key the declarations do not allow or a value they refuse."""
        rows: list[dict[str, Any]] = []
        problems: list[tuple[str, str]] = []
        source = str(cfg.path)
        for name, profile in cfg.tables.get("profiles", {}).items():
            for key, value in _flat(f"profiles.{name}", profile):
                setting = self._check(key, value, cfg, problems)
                rows.append(_row(key, value, source, setting))
            merged = _merged(name, profile)
            if merged is not None:  # what its agent kind adds, marked as such
                for key, origin in merged.sources.items():
                    if origin != "file":
                        value = merged.table[key]
                        rows.append(_row(f"profiles.{name}.{key}", value, origin, COMMON.get(key)))
        file_plugins = cfg.tables.get("plugins", {})
        for table in sorted(set(self.plugin_targets) | set(file_plugins)):
            present = file_plugins.get(table, {})
            try:
                declared = self.plugin_keys(table)
            except BridgeError as exc:
                problems.append((f"plugins.{table}", str(exc)))
                declared = {}
            for key, value in [
                *((k, present.get(k, _MISSING)) for k in declared),
                *((k, v) for k, v in present.items() if k not in declared),
            ]:
                full = f"plugins.{table}.{key}"
                if value is _MISSING:
                    rows.append(_row(full, declared[key].default, "default", declared[key]))
                    continue
                setting = self._check(full, value, cfg, problems) if declared else None
                rows.append(_row(full, value, source, setting))
        return rows, problems

    def _check(self, key: str, value: Any, cfg: Config, problems: list[tuple[str, str]]) -> Setting | None:
        try:
            target = self.parse_key(key, cfg.tables)
            setting = target.setting
            setting.parse(value, str(cfg.path))
            if target.section == "profiles" and target.name == "launcher":
                self.launcher_keys(str(value))
            return setting
        except BridgeError as exc:
            problems.append((key, str(exc)))
            return None


_MISSING = object()


def _merged(name: str, table: Mapping[str, Any]) -> agent_kinds.Profile | None:
    """The profile merged with its agent kind, or None when its ``agent`` is unknown (that
    key is then reported as a problem on its own)."""
    try:
        return agent_kinds.resolve(name, table)
    except ConfigError:
        return None


def _flat(prefix: str, table: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``env = {A = "1"}`` → ``prefix.env.A``: the keys `bridge config set` takes."""
    for key, value in table.items():
        if isinstance(value, dict):
            for entry, inner in value.items():
                yield f"{prefix}.{key}.{entry}", inner
        else:
            yield f"{prefix}.{key}", value


def _row(key: str, value: Any, source: str, setting: Setting | None) -> dict[str, Any]:
    if setting is not None and setting.secret and value is not None:
        value = "********"
    return {
        "key": key,
        "value": value,
        "source": source,
        "env": None,
        "help": setting.help if setting is not None else "",
    }


def unset_value(key: str, declarations: Declarations) -> bool:
    """Remove a table key, a whole ``profiles.NAME`` / ``plugins.NAME`` table, or one entry
    of a table-valued key; returns whether it was there. Anything the file has may be
    removed (that is how a stray key gets repaired); a key it does not have must at least
    be a declared one, so a typo is not reported as "was not set"."""
    parts = key.split(".")
    if len(parts) < 2 or not all(parts):
        raise ConfigError(
            f"{key!r} is not one table or key of [{parts[0]}]",
            f"remove one table ({parts[0]}.NAME) or key ({parts[0]}.NAME.KEY) at a time",
        )
    path = paths.config_file()
    data = config.read_file(path)
    node: Any = data
    trail: list[tuple[dict[str, Any], str]] = []
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            if len(parts) > 2:
                declarations.parse_key(key, data)
            return False
        trail.append((node, part))
        node = node[part]
    for parent, part in reversed(trail):
        del parent[part]
        if parent is data or parent:
            break  # keep tables that still hold something; drop the ones left empty
    config_edit.write_file(path, data)
    return True
