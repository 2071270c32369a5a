"""``bridge browser``: drive browsers through the auto-elected browser broker.

Subcommands load lazily (like the root group), and this module imports no WebSocket library
at import time, so ``bridge --help`` and ``bridge browser --help`` stay fast. ``serve`` is the
long-lived adapter that hosts or guests and takes part in failover; every other command is a
one-shot *guest*: it never hosts (a broker that dies with the command would be useless) and
fails fast, naming ``bridge browser serve``, when no broker runs.
"""

from __future__ import annotations

import base64
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import click

from bridgecli.cli import complete, output
from bridgecli.cli.lazy import LazyGroup, StaticTable
from bridgecli.errors import ConfigError

#: name -> ("module:attribute", short help); ``launch``/``attach``/``extension-path`` are the
#: executor side (bridgecli.cli.browser_exec).
BROWSER_COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("bridgecli.cli.browser:serve", "Run the browser broker adapter: host or guest, with failover (blocks)."),
    "targets": ("bridgecli.cli.browser:targets", "List connected browsers (executors)."),
    "open": ("bridgecli.cli.browser:open_", "Open URL in a new tab of GROUP (creates the group)."),
    "do": ("bridgecli.cli.browser:do", "Run ACTION on GROUP (click, type, text, snapshot, …)."),
    "tabs": ("bridgecli.cli.browser:tabs", "List groups, or the tabs of one GROUP."),
    "release": ("bridgecli.cli.browser:release", "Give up ownership of GROUP (its tabs stay)."),
    "launch": ("bridgecli.cli.browser_exec:launch", "Start a browser and serve it as an executor until Ctrl-C."),
    "attach": ("bridgecli.cli.browser_exec:attach", "Serve an already running browser as an executor until Ctrl-C."),
    "extension-path": (
        "bridgecli.cli.browser_exec:extension_path",
        'Print the folder of the browser extension, for "Load unpacked".',
    ),
}


@click.group(cls=LazyGroup, table=StaticTable(BROWSER_COMMANDS))
@click.option(
    "--port",
    type=int,
    default=None,
    metavar="PORT",
    help="Loopback port of the broker (env BRIDGE_BROWSER_PORT, config browser.port; default 4517).",
)
@click.pass_obj
def browser(app, port: int | None) -> None:
    """Drive browsers through the auto-elected browser broker.

    The first `bridge browser serve` (or MCP server, or plugin) to bind 127.0.0.1:PORT hosts the
    broker; later ones join as guests and take over if the host exits. Browsers connect as
    executors (`bridge browser launch`, or the extension with the token from `bridge token
    show`). Tab groups are the routing unit: the agent that opens a group owns it until it
    disconnects or releases it. See docs/browser-protocol.md.
    """
    if port is not None:
        if not 0 < port < 65536:
            raise click.BadParameter("must be 1-65535", param_hint="--port")
        app.overrides["browser.port"] = port


def _settings(app) -> tuple[int, str | None]:
    cfg = app.config
    return cfg.get("browser.port"), cfg.get("browser.token")


def _guest(app):  # -> BrowserBridge
    """A one-shot guest connection (never hosts, never re-elects)."""
    from bridgecli.browser.connect import BrowserBridge

    port, token = _settings(app)
    return BrowserBridge(port, token, label="bridge-cli", allow_host=False, failover=False).start()


def _run(
    app,
    action: str,
    group: str | None = None,
    params: dict[str, Any] | None = None,
    *,
    target: str | None = None,
    timeout: float = 60.0,
) -> Any:
    bridge = _guest(app)
    try:
        return bridge.send(action, group, params, target=target, timeout=timeout)
    finally:
        bridge.close()


def _remember(**seen: Any) -> None:
    """Record targets/groups for TAB completion (bridgecli.cache); TAB never asks the broker."""
    from bridgecli import cache

    cache.update_browser(**seen)


timeout_option = click.option(
    "--timeout",
    type=float,
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for the browser's answer.",
)


# --- serve ---------------------------------------------------------------------------------------


@click.command()
@click.option("--label", default="serve", show_default=True, help="Name of this adapter in the broker's logs.")
@click.pass_obj
def serve(app, label: str) -> None:
    """Run the browser broker adapter: host or guest, with failover (blocks).

    Binds 127.0.0.1:PORT and hosts the broker, or joins the running one as a guest and
    re-elects if its host exits. Writes the token file (bridge.json) when hosting. Logs go to
    stderr; stop with Ctrl-C or SIGTERM. Run it in tmux or as a user service.
    """
    from bridgecli.browser.connect import BrowserBridge

    port, token = _settings(app)
    stop = threading.Event()

    def log(text: str) -> None:
        output.note(f"{time.strftime('%H:%M:%S')} bridge browser: {text}")

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    bridge = BrowserBridge(port, token, label=label, allow_host=True, failover=True, log=log)
    bridge.start()
    try:
        while not stop.wait(0.5):
            pass
    finally:
        log("stopping")
        bridge.close()


# --- one-shot commands -----------------------------------------------------------------------


@click.command()
@output.json_option
@click.pass_obj
def targets(app, as_json: bool) -> None:
    """List connected browsers (executors).

    One row per browser: its id, label, kind (chrome for the extension, cdp, ...), whether
    it is the default, and its groups. TARGET for `open --target` is a browser's label or
    id; the default browser gets new groups when no target is given.
    """
    rows = _run(app, "targets")["targets"]
    _remember(targets=rows, groups=[g for r in rows for g in r.get("groups", [])])
    if as_json:
        output.data(rows)
        return
    if not rows:
        output.note("no browser is connected — start one with `bridge browser launch --label NAME`")
    output.table(
        ["ID", "LABEL", "KIND", "DEFAULT", "GROUPS"],
        [
            (r["id"], r["label"], r.get("kind", r.get("browser")), "yes" if r["default"] else "", ",".join(r["groups"]))
            for r in rows
        ],
    )


@click.command("open")
@click.argument("group", shell_complete=complete.browser_groups)
@click.argument("url")
@click.option(
    "--target",
    metavar="TARGET",
    default=None,
    shell_complete=complete.browser_targets,
    help="Browser label or id for a new group; omit unless several browsers are connected.",
)
@timeout_option
@output.json_option
@click.pass_obj
def open_(app, group: str, url: str, target: str | None, timeout: float, as_json: bool) -> None:
    """Open URL in a new tab of GROUP (creates the group).

    A new group goes to --target or the default browser, and belongs to this command's
    connection; when the command exits the group is orphaned, so the next command that names
    it adopts it. A group another live agent owns is refused.
    """
    data = _run(app, "open", group, {"url": url}, target=target, timeout=timeout)
    _remember(add_group=group)
    if as_json:
        output.data(data)
    else:
        output.line(f"opened {data.get('url', url)} in group {group} (tab {data.get('tab')})")


def _parse_pairs(pairs: tuple[str, ...]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for pair in pairs:
        if ":=" in pair and ("=" not in pair or pair.index(":=") < pair.index("=")):
            key, raw = pair.split(":=", 1)
            try:
                params[key] = json.loads(raw)
            except ValueError:
                raise click.BadParameter(f"{pair!r}: the value after := must be JSON") from None
        elif "=" in pair:
            key, value = pair.split("=", 1)
            params[key] = value
        else:
            raise click.BadParameter(f"{pair!r}: expected key=value or key:=json")
        if not key:
            raise click.BadParameter(f"{pair!r}: empty key")
    return params


@click.command()
@click.argument("group", shell_complete=complete.browser_groups)
@click.argument("action")
@click.argument("params", nargs=-1, metavar="[KEY=VALUE | KEY:=JSON]...")
@click.option(
    "-o",
    "--output",
    "out_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="For screenshot: write the PNG to this file.",
)
@timeout_option
@output.json_option
@click.pass_obj
def do(
    app, group: str, action: str, params: tuple[str, ...], out_file: Path | None, timeout: float, as_json: bool
) -> None:
    """Run ACTION on GROUP (click, type, text, snapshot, …).

    Actions: navigate url=…, click selector=…, type selector=… text=…, text [selector=…],
    snapshot, screenshot [-o FILE], close, tabs. KEY=VALUE passes a string, KEY:=JSON any JSON
    value (tab:=123). Example: bridge browser do research type selector=#q text=hello
    """
    data = _run(app, action, group, _parse_pairs(params), timeout=timeout)
    if out_file is not None:
        png = data.get("png") if isinstance(data, dict) else None
        if not isinstance(png, str):
            raise ConfigError(
                "--output only works with screenshot", "drop -o, or use: bridge browser do GROUP screenshot -o shot.png"
            )
        out_file.write_bytes(base64.b64decode(png.split(",", 1)[-1]))
        output.note(f"wrote {out_file}")
        return
    if as_json or not isinstance(data, dict):
        output.data(data)
    elif "text" in data and isinstance(data["text"], str):
        output.line(data["text"])
    elif "snapshot" in data and isinstance(data["snapshot"], str):
        output.line(data["snapshot"])
    else:
        output.data(data)


@click.command()
@click.argument("group", required=False, shell_complete=complete.browser_groups)
@timeout_option
@output.json_option
@click.pass_obj
def tabs(app, group: str | None, timeout: float, as_json: bool) -> None:
    """List groups, or the tabs of one GROUP.

    Without GROUP: every group the broker knows, its browser, and whether it is owned by
    another client or orphaned (adoptable). With GROUP: that group's tabs (this adopts an
    orphaned group, like any command that names it).
    """
    data = _run(app, "tabs", group, timeout=timeout)
    rows = data.get("groups", []) if isinstance(data, dict) else []
    if group is None:
        _remember(groups=[r["group"] for r in rows if isinstance(r, dict) and "group" in r])
    if as_json:
        output.data(rows)
        return
    if group is None:
        output.table(
            ["GROUP", "BROWSER", "OWNER", "CONNECTED"],
            [
                (
                    r["group"],
                    r.get("label") or r["executor"],
                    "this command" if r["owner"] == "you" else r["owner"],
                    "yes" if r["connected"] else "no",
                )
                for r in rows
            ],
        )
        return
    output.table(
        ["TAB", "URL", "TITLE"], [(t.get("tab"), t.get("url"), t.get("title")) for r in rows for t in r.get("tabs", [])]
    )


@click.command()
@click.argument("group", shell_complete=complete.browser_groups)
@click.pass_obj
def release(app, group: str) -> None:
    """Give up ownership of GROUP (its tabs stay).

    The group becomes orphaned: the next agent that names it adopts it. Refused when another
    live agent owns it.
    """
    _run(app, "release", group)
    output.note(f"released group {group}")
