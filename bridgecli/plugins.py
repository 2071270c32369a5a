"""The one place that touches entry points and the pluggy manager.

Built-in plugins (``bridgecli.default_plugins``) register through the same hooks as third
parties. Loading is guarded: a plugin that fails to import, or raises inside a hook, is
recorded with its name in :attr:`Plugins.failures` and everything else keeps working.

``BRIDGE_LOAD_PLUGINS`` selects third-party plugins: unset = all, ``""`` = none,
``"a,b"`` = only those distributions or entry-point names. ``BRIDGE_TRACE_HOOKS=1`` prints
every hook call to stderr.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from bridgecli import hookspecs
from bridgecli.errors import NotFound, PluginError

GROUP = "bridgecli"

#: Built-in plugins, registered exactly like third-party ones.
DEFAULT_PLUGINS = (
    "bridgecli.default_plugins.hold_backend",
    "bridgecli.default_plugins.exec_backend",
    "bridgecli.default_plugins.subprocess_launcher",
)

#: provider kinds collected through ``register(...)`` hooks: kind -> hook name
PROVIDER_HOOKS = {
    "commands": "register_commands",
    "backends": "register_delivery_backends",
    "launchers": "register_launchers",
    "browser_targets": "register_browser_targets",
    "profile_settings": "register_profile_settings",
    "plugin_settings": "register_plugin_settings",
}


@dataclass
class PluginInfo:
    """One loaded plugin, as ``bridge plugins`` shows it."""

    name: str
    version: str | None
    builtin: bool
    hooks: list[str] = field(default_factory=list)
    provides: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Plugins:
    """The plugin manager plus what every plugin provides."""

    pm: pluggy.PluginManager
    infos: dict[str, PluginInfo]
    failures: dict[str, str]
    providers: dict[str, dict[str, tuple[str, Any]]]  # kind -> name -> (plugin, value)

    def provider(self, kind: str, name: str) -> Any:
        """The registered value for ``name`` of ``kind``, or a NotFound naming the choices."""
        table = self.providers[kind]
        if name not in table:
            known = ", ".join(sorted(table)) or "none"
            singular = {
                "backends": "delivery backend",
                "launchers": "launcher",
                "browser_targets": "browser target",
                "commands": "command",
                "profile_settings": "launcher with profile settings",
                "plugin_settings": "settings table",
            }[kind]
            raise NotFound(
                f"unknown {singular} {name!r} (installed: {known})",
                "install the plugin that provides it and check `bridge plugins`",
            )
        return table[name][1]


def _selected(ep: metadata.EntryPoint, wanted: set[str] | None) -> bool:
    if wanted is None:
        return True
    dist = ep.dist.name if ep.dist is not None else ""
    return ep.name in wanted or dist in wanted


def _tracer(pm: pluggy.PluginManager) -> None:
    def before(hook_name: str, impls: Any, kwargs: Any) -> None:
        print(f"bridge: hook {hook_name} -> {[i.plugin_name for i in impls]}", file=sys.stderr)

    def after(outcome: Any, hook_name: str, impls: Any, kwargs: Any) -> None:
        pass

    pm.add_hookcall_monitoring(before, after)


def load(*, builtin_only: bool = False) -> Plugins:
    """Build the plugin manager: built-ins, then the selected entry points, then collect
    every provider through the ``register(...)`` hooks."""
    pm = pluggy.PluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    trace = bool(os.environ.get("BRIDGE_TRACE_HOOKS"))
    if trace:
        _tracer(pm)
    infos: dict[str, PluginInfo] = {}
    failures: dict[str, str] = {}
    from bridgecli import __version__

    for module_name in DEFAULT_PLUGINS:
        module = importlib.import_module(module_name)
        name = module_name.rsplit(".", 1)[1]
        pm.register(module, name=name)
        infos[name] = PluginInfo(name=name, version=__version__, builtin=True)

    raw = os.environ.get("BRIDGE_LOAD_PLUGINS")
    wanted = None if raw is None else {part.strip() for part in raw.split(",") if part.strip()}
    if not builtin_only:
        for ep in metadata.entry_points(group=GROUP):
            if not _selected(ep, wanted) or pm.get_plugin(ep.name) is not None:
                continue
            try:
                module = ep.load()
                pm.register(module, name=ep.name)
            except Exception as exc:  # a broken plugin must never brick the CLI
                failures[ep.name] = f"{type(exc).__name__}: {exc}"
                continue
            version = ep.dist.version if ep.dist is not None else None
            infos[ep.name] = PluginInfo(name=ep.name, version=version, builtin=False)
    # a misspelt hook fails loudly — the plugin is named with the unknown hook, dropped, and
    # reported on every command (and `bridge plugins` exits non-zero) — but never takes the
    # rest of bridge down with it
    for _ in range(len(infos) + 1):
        try:
            pm.check_pending()
            break
        except pluggy.PluginValidationError as exc:
            name = pm.get_name(exc.plugin) or str(exc.plugin)
            if infos.get(name) is not None and infos[name].builtin:
                raise PluginError(f"built-in plugin {name}: {exc}", "this is a bug in bridge") from None
            failures[name] = f"{exc} (see docs/plugin-hooks.md for the hook names)"
            pm.unregister(exc.plugin)
            infos.pop(name, None)

    for name, info in infos.items():
        plugin = pm.get_plugin(name)
        info.hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])

    providers: dict[str, dict[str, tuple[str, Any]]] = {kind: {} for kind in PROVIDER_HOOKS}
    for kind, hook_name in PROVIDER_HOOKS.items():
        hook = getattr(pm.hook, hook_name)
        for impl in hook.get_hookimpls():
            plugin_name = impl.plugin_name

            def register(name: str, value: Any, *extra: Any, _kind: str = kind, _plugin: str = plugin_name) -> None:
                if not isinstance(name, str) or not name:
                    raise ValueError(f"{_kind} names must be non-empty strings")
                if name in providers[_kind]:
                    owner = providers[_kind][name][0]
                    raise ValueError(f"{_kind[:-1]} {name!r} is already provided by {owner}")
                providers[_kind][name] = (_plugin, (value, *extra) if extra else value)
                infos[_plugin].provides.setdefault(_kind, []).append(name)

            if trace:  # called per implementation (not via pm.hook), so trace it here
                print(f"bridge: hook {hook_name} -> {plugin_name!r}", file=sys.stderr)
            try:
                impl.function(register=register)
            except Exception as exc:
                failures[plugin_name] = f"{hook_name} raised {type(exc).__name__}: {exc}"
    return Plugins(pm=pm, infos=infos, failures=failures, providers=providers)


_cached: Plugins | None = None


def get() -> Plugins:
    """The process-wide plugin set (loaded on first use)."""
    global _cached
    if _cached is None:
        _cached = load()
    return _cached


def reset() -> None:
    """Forget the loaded plugins (tests change the environment between loads)."""
    global _cached
    _cached = None


def resolve_target(target: str) -> Any:
    """Import ``"package.module:attribute"`` (the module itself without ``:attribute``); a
    failure names the target."""
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attr) if attr else module
    except Exception as exc:
        raise PluginError(
            f"cannot load {target}: {type(exc).__name__}: {exc}",
            "reinstall the plugin or unset it with BRIDGE_LOAD_PLUGINS",
        ) from None
