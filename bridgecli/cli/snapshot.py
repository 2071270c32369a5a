"""Build the CLI snapshot that :mod:`bridgecli.cli.fastpath` answers from without click.

The snapshot is taken from the live click tree (built-ins and plugin commands alike), so it
cannot drift from what click would do: per command, its parameters (option names, flags,
nargs, how a value completes) and subcommands with click's own short help; and the root
``--help`` text as click renders it, per help width. It lists the files and directories it
depends on with their mtimes, so a changed package or an installed/removed plugin makes it
stale (see :func:`bridgecli.cli.fastpath.load`).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import sysconfig
from typing import Any

import click

from bridgecli.cli import complete
from bridgecli.private_apis.click_completion import custom_shell_complete


def _completion(param: click.Parameter) -> list[Any]:
    """How a value of ``param`` completes: ``["callback", name]`` (a function of
    :mod:`bridgecli.cli.complete`), ``["choice",
    values, case_sensitive]``, ``["path", "file"|"dir"]``, ``["none"]``, or ``["opaque"]``
    (something only click can run: the fast path falls back to click)."""
    custom = custom_shell_complete(param)
    if custom is not None:
        # only ours: they read nothing of click's context but ``params`` (a plugin's may)
        name = getattr(custom, "__name__", "")
        if getattr(complete, name, None) is custom:
            return ["callback", name]
        return ["opaque"]
    kind = type(param.type)
    method = kind.shell_complete
    if method is click.ParamType.shell_complete:
        return ["none"]
    if isinstance(param.type, click.Choice) and method is click.Choice.shell_complete:
        ctx = click.Context(click.Command("x"))
        return ["choice", [param.type.normalize_choice(c, ctx) for c in param.type.choices], param.type.case_sensitive]
    if isinstance(param.type, click.Path) and method is click.Path.shell_complete:
        return ["path", "dir" if param.type.dir_okay and not param.type.file_okay else "file"]
    if isinstance(param.type, click.File) and method is click.File.shell_complete:
        return ["path", "file"]
    return ["opaque"]


def _param(param: click.Parameter) -> dict[str, Any]:
    is_option = isinstance(param, click.Option)
    return {
        "option": is_option,
        "name": param.name,
        "opts": list(param.opts),
        "secondary_opts": list(param.secondary_opts),
        "nargs": param.nargs,
        "help": param.help if is_option else None,
        "hidden": bool(getattr(param, "hidden", False)),
        "multiple": bool(param.multiple),
        "flag": bool(isinstance(param, click.Option) and (param.is_flag or param.count)),
        "complete": _completion(param),
    }


def _node(command: click.Command, ctx: click.Context) -> dict[str, Any]:
    params = command.get_params(ctx)
    node: dict[str, Any] = {
        "params": [_param(p) for p in params],
        "prefixes": sorted(
            {opt[0] for p in params if isinstance(p, click.Option) for opt in [*p.opts, *p.secondary_opts]}
        ),
        "chain": bool(isinstance(command, click.Group) and command.chain),
        "commands": None,
    }
    if isinstance(command, click.Group):
        node["commands"] = {}
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None:
                continue
            child = _node(sub, click.Context(sub, info_name=name, parent=ctx))
            child["short_help"] = sub.get_short_help_str()
            child["hidden"] = bool(sub.hidden)
            node["commands"][name] = child
    return node


def _depends_on() -> dict[str, int]:
    """Directories on ``sys.path`` (an install or removal changes their mtime) and every
    non-stdlib module file loaded so far (an edited package or plugin changes theirs)."""
    stdlib = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")}
    site = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
    paths = [p for p in sys.path if p and os.path.exists(p)]
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        real = os.path.realpath(path)
        if any(real.startswith(s + os.sep) for s in stdlib) and not any(real.startswith(s + os.sep) for s in site):
            continue
        paths.append(path)
    stamps = {}
    for path in paths:
        with contextlib.suppress(OSError):
            stamps[path] = os.stat(path).st_mtime_ns
    return stamps


def build(key: list[Any]) -> dict[str, Any]:
    """A fresh snapshot of the root group (imports every command module and plugin), valid
    while ``key`` (what the reader checks besides files) stays the same."""
    from bridgecli import plugins
    from bridgecli.cli.app import CONTEXT_SETTINGS, root

    with contextlib.redirect_stderr(io.StringIO()):  # click's own path reports plugin failures
        tree = _node(root, click.Context(root, info_name="bridge", **CONTEXT_SETTINGS))
    return {"key": key, "tree": tree, "help": {}, "clean": not plugins.get().failures, "depends": _depends_on()}


def render_help() -> tuple[str, str]:
    """What ``bridge --help`` prints now, as (stdout, stderr), rendered by click."""
    from bridgecli.cli.app import CONTEXT_SETTINGS, root

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        ctx = click.Context(root, info_name="bridge", **CONTEXT_SETTINGS)
        text = root.get_help(ctx)
    return text + "\n", err.getvalue()
