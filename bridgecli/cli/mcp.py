"""``bridge mcp``: the stdio MCP server for a main or orchestrator session.

It always completes the handshake, gateway or not, because MCP clients never restart a
server that failed at start: without a gateway, tool calls are one-line errors naming the
fix, and the session attaches once the gateway runs. Its label is claimed locally first
(:mod:`bridgecli.mcp.identity`): one per working directory, a numbered slot when another
live session serves it. Two tool sets, each with its switch: messaging and browser
(:mod:`bridgecli.mcp.browser_tools`). The MCP SDK is imported only when this command runs.
"""

from __future__ import annotations

import importlib.util
import logging
import sys

import click

from bridgecli.errors import ConfigError, MissingDependency


@click.command()
@click.option(
    "--label",
    "-l",
    default=None,
    envvar="BRIDGE_MCP_LABEL",
    show_envvar=True,
    help="Pin the label of this session's entity (default: derived from the working directory, "
    "NAME-HASH). Re-attaches to the hold entity with that label, so replies held for an earlier "
    "session are kept; if another live session serves it, this one takes LABEL-2, LABEL-3 ...",
)
@click.option(
    "--role",
    "-r",
    type=click.Choice(["main", "orchestrator"]),
    default="main",
    show_default=True,
    help="The entity's role in the roster.",
)
@click.option(
    "--browser/--no-browser",
    "browser",
    default=None,
    help="Offer the browser tools and join the browser-broker election on browser.port "
    "(default on; env BRIDGE_MCP_BROWSER, config mcp.browser).",
)
@click.option(
    "--messaging/--no-messaging",
    "messaging",
    default=None,
    help="Offer the messaging tools, which need this host's gateway (default on; env "
    "BRIDGE_MCP_MESSAGING, config mcp.messaging). --no-messaging: browser tools only, "
    "no gateway needed.",
)
@click.pass_obj
def mcp(app, label: str | None, role: str, browser: bool | None, messaging: bool | None) -> None:
    """Run the stdio MCP server for a main or orchestrator session.

    Speaks MCP on stdin/stdout (Claude Code, OpenCode, Codex …). Registers (or re-attaches
    to) a --deliver hold entity on the local gateway, labelled after the working directory
    unless --label pins one; its messages are held until bridge_poll, with notices when they
    arrive. Tools: bridge_send/ask/reply/answer/poll/roster/spawn/stop. It starts without a
    gateway: calls fail until `bridge gateway` runs, then it attaches.

    Browser tools (browser_targets, browser_open, browser_tabs, ...): the server hosts or
    joins the browser broker like `bridge browser serve`, and takes over if the host exits;
    they need the extra bridgecli[browser]. See docs/mcp.md.
    """
    cfg = app.config
    use_browser = cfg.get("mcp.browser") if browser is None else browser
    use_messaging = cfg.get("mcp.messaging") if messaging is None else messaging
    if not (use_browser or use_messaging):
        raise ConfigError(
            "bridge mcp has nothing to serve with both --no-messaging and --no-browser", "drop one of them"
        )
    _check_sdk()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="bridge mcp: %(levelname)s: %(message)s")
    logging.getLogger("bridgecli.mcp.browser").setLevel(logging.INFO)  # host/guest changes: worth a line
    logging.getLogger("bridgecli.mcp").setLevel(logging.INFO)  # which label, attached when: worth a line
    from bridgecli.mcp.identity import claim
    from bridgecli.mcp.link import GatewayLink

    link = None
    note = ""
    if use_messaging:
        session = claim(label)  # locked until the process exits
        link = GatewayLink(label=session.label, role=role)
        note = session.note
        logging.getLogger("bridgecli.mcp").info("serving label %s%s", session.label, f": {note}" if note else "")
    nudge_after = float(cfg.values["messaging.nudge_after"])

    import anyio

    from bridgecli.mcp import messaging_tools
    from bridgecli.mcp.server import serve

    tool_sets: list = [messaging_tools.register] if use_messaging else []
    notes: list[str] = []
    if use_browser:
        from bridgecli.mcp import browser_tools

        tool_sets.append(
            browser_tools.tool_set(
                cfg.get("browser.port"), cfg.get("browser.token"), f"mcp-{link.label if link else label or role}"
            )
        )
        notes.append(browser_tools.BROWSER_INSTRUCTIONS)
    anyio.run(serve, link, nudge_after, tool_sets, notes, note)


def _check_sdk() -> None:
    """The server is written against the SDK's 2.x low-level API; say so plainly otherwise."""
    if importlib.util.find_spec("mcp") is None:
        raise MissingDependency("the MCP SDK is not installed", "pip install 'bridgecli[mcp]'")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("mcp")
    except PackageNotFoundError:
        return
    if int(found.split(".")[0]) < 2:
        raise MissingDependency(f"bridge mcp needs the MCP SDK 2.x, found {found}", "pip install -U 'mcp>=2.3'")
