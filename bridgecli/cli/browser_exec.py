"""``bridge browser launch|attach|extension-path``: run an executor (a browser target).

The broker routes commands; these commands supply the browsers. ``launch`` starts a browser
of a registered kind (``cdp`` from the bridgecli-cdp plugin) and serves it until Ctrl-C or
SIGTERM, then kills it; ``attach`` serves a browser that is already running;
``extension-path`` prints the MV3 extension folder for chrome://extensions → "Load unpacked".
Executors find the broker on ``browser.port`` with the shared token (``--token``,
``browser.token`` / ``OCB_TOKEN``, else the token file that ``bridge browser serve`` writes).
"""

from __future__ import annotations

import base64
import hashlib
import json
import signal
import threading
from importlib import resources
from pathlib import Path
from typing import Any

import click

from bridgecli.cli import output
from bridgecli.errors import BrowserError


def extension_dir() -> Path:
    """The shipped extension folder (package data)."""
    return Path(str(resources.files("bridgecli.browser").joinpath("extension")))


def extension_id(folder: Path | None = None) -> str:
    """The extension id Chrome assigns: from the manifest's public ``key`` (sha256 of the DER
    key, first 32 hex digits mapped 0-f → a-p), so it is the same on every install."""
    manifest = json.loads(((folder or extension_dir()) / "manifest.json").read_text())
    digest = hashlib.sha256(base64.b64decode(manifest["key"])).hexdigest()[:32]
    return "".join(chr(ord("a") + int(c, 16)) for c in digest)


def _options(
    ctx: click.Context,
    label: str,
    executor_id: str | None,
    token: str | None,
    make_default: bool,
    as_json: bool,
    kind: str,
):
    from bridgecli.browser import token_file
    from bridgecli.interfaces import ExecutorOptions

    config = ctx.obj.config
    port = config.get("browser.port")  # `bridge browser --port` overrides it
    explicit = token or config.get("browser.token")
    token = explicit or token_file.guest_token(None)
    if not token:
        raise BrowserError(
            f"no browser-bridge token ({token_file.path()} does not exist)",
            "start the broker first with `bridge browser serve`, or pass --token",
        )
    announced: dict[str, Any] = {}

    def on_status(state: str, info: dict[str, Any]) -> None:
        # Called from the executor's thread; click.echo is fine from any thread. A retry loop
        # repeats its state every few seconds: say each state once, until it changes.
        if state == announced.get("last") and state in ("refused", "disconnected"):
            return
        announced["last"] = state
        if state == "launched":
            announced.update(info)
            output.note(f"bridge: started {kind} browser (DevTools {info.get('devtools')})")
        elif state == "connected":
            output.note(f"bridge: executor {info.get('label')} ({info.get('id')}) connected to {info.get('url')}")
            if as_json and not announced.get("printed"):
                announced["printed"] = True
                # one compact line: the command keeps running, so readers take it line by line
                output.line(
                    json.dumps(
                        {
                            "kind": kind,
                            "label": info.get("label"),
                            "id": info.get("id"),
                            "broker": info.get("url"),
                            "devtools": announced.get("devtools"),
                        }
                    )
                )
        elif state in ("refused", "replaced"):
            output.warn(str(info.get("error")))
        elif state == "disconnected":
            output.note(
                f"bridge: no broker connection ({info.get('error')}); retrying until one "
                f"answers (start it with `bridge browser serve`)"
            )

    return ExecutorOptions(
        url=f"ws://127.0.0.1:{port}/",
        token=token,
        label=label,
        executor_id=executor_id,
        settings={
            "on_status": on_status,
            "default": make_default,
            # a token from the file is re-read on every reconnect
            "token_source": None if explicit else (lambda: token_file.guest_token(None)),
        },
    )


def _target(ctx: click.Context, kind: str):
    from bridgecli import plugins

    factory = plugins.get().provider("browser_targets", kind)
    return factory(ctx.obj.config)


def _run_until_signal(body) -> None:
    """Run ``body(stop)`` in this thread; SIGINT/SIGTERM set ``stop`` so the target can shut
    its browser down cleanly instead of being torn down mid-command."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        body(stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_common = [
    click.option("--label", required=True, help="Name agents use to pick this browser (--target)."),
    click.option(
        "--id",
        "executor_id",
        metavar="ID",
        default=None,
        help="Executor id. Default: minted once per label on this host, then reused.",
    ),
    click.option(
        "--token",
        default=None,
        metavar="TOKEN",
        help="Broker token (default: browser.token / OCB_TOKEN, else the token file).",
    ),
    click.option("--default", "make_default", is_flag=True, help="Make this browser the default for new groups."),
    click.option("--kind", default="cdp", show_default=True, help="Browser target kind (see `bridge plugins`)."),
    output.json_option,
]


def _apply(options):
    def decorate(func):
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


@click.command("launch")
@click.option("--headless", is_flag=True, help="Run the browser without a window.")
@_apply(_common)
@click.pass_context
def launch(
    ctx: click.Context,
    headless: bool,
    label: str,
    executor_id: str | None,
    token: str | None,
    make_default: bool,
    kind: str,
    as_json: bool,
) -> None:
    """Start a browser and serve it as an executor until Ctrl-C.

    The browser gets a private temporary profile and is killed on exit. It connects to the
    broker (`bridge browser serve`) and reconnects by itself when a new broker is elected.
    With --json, one JSON line {kind, label, id, broker, devtools} is printed once connected.
    """
    options = _options(ctx, label, executor_id, token, make_default, as_json, kind)
    target = _target(ctx, kind)
    _run_until_signal(lambda stop: target.launch(options, headless=headless, stop=stop))


@click.command("attach")
@click.option(
    "--cdp",
    "endpoint",
    required=True,
    metavar="URL",
    help="DevTools endpoint of the running browser, e.g. http://127.0.0.1:9222.",
)
@_apply(_common)
@click.pass_context
def attach(
    ctx: click.Context,
    endpoint: str,
    label: str,
    executor_id: str | None,
    token: str | None,
    make_default: bool,
    kind: str,
    as_json: bool,
) -> None:
    """Serve an already running browser as an executor until Ctrl-C.

    Start Chromium with --remote-debugging-port=PORT (and a non-default --user-data-dir),
    then pass --cdp http://127.0.0.1:PORT. The browser keeps running when this stops.
    """
    options = _options(ctx, label, executor_id, token, make_default, as_json, kind)
    target = _target(ctx, kind)
    _run_until_signal(lambda stop: target.attach(options, endpoint=endpoint, stop=stop))


@click.command("extension-path")
@output.json_option
def extension_path(as_json: bool) -> None:
    """Print the folder of the browser extension, for "Load unpacked".

    In chrome://extensions turn on Developer mode, click "Load unpacked", pick this folder,
    then open the extension's options and paste the token from `bridge token show`.
    """
    folder = extension_dir()
    if as_json:
        output.data({"path": str(folder), "id": extension_id(folder)})
    else:
        output.line(str(folder))
