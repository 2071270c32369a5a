"""``bridge plugins``: what is installed and what each plugin provides."""

from __future__ import annotations

import click

from bridgecli.cli import output
from bridgecli.errors import ExitCode


@click.command()
@output.json_option
def plugins(as_json: bool) -> None:
    """List installed plugins and what they provide.

    Shows each plugin's name, version, hooks, and the commands, delivery backends,
    launchers, browser targets and settings (profile and plugin keys) it registers. Plugins
    that failed to load are listed with the reason. BRIDGE_LOAD_PLUGINS='' loads no
    third-party plugin, 'a,b' only those.
    """
    from bridgecli import plugins as plugin_mod

    loaded = plugin_mod.get()
    infos = sorted(loaded.infos.values(), key=lambda i: (not i.builtin, i.name))
    rows = [
        {"name": i.name, "version": i.version, "builtin": i.builtin, "hooks": i.hooks, "provides": i.provides}
        for i in infos
    ]
    if as_json:
        output.data({"plugins": rows, "failures": loaded.failures})
        if loaded.failures:
            raise SystemExit(int(ExitCode.PLUGIN))
        return
    for info in infos:
        kind = "built-in" if info.builtin else "plugin"
        output.line(f"{info.name} {info.version or '?'} ({kind})")
        output.line(f"  hooks: {', '.join(info.hooks) or '-'}")
        for what, names in sorted(info.provides.items()):
            output.line(f"  {what.replace('_', ' ')}: {', '.join(sorted(names))}")
    for name, problem in loaded.failures.items():
        output.line(f"{name} FAILED: {problem}")
    if loaded.failures:
        from bridgecli.errors import PluginError

        raise PluginError(
            f"{len(loaded.failures)} plugin(s) failed to load: {', '.join(loaded.failures)}",
            "fix or uninstall them (details above); everything else works",
        )
