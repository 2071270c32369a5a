"""``bridge mcp``: the stdio MCP server for a main or orchestrator session.

The MCP SDK is imported only when this command runs (never for ``bridge --help``), and
only after the gateway answered: a client that starts ``bridge mcp`` without a gateway gets
one line on stderr and exit code 5, with nothing written to stdout (which is the protocol's).
"""

from __future__ import annotations

import importlib.util
import logging
import sys

import click

from bridgecli.errors import MissingDependency


@click.command()
@click.option("--label", "-l", default=None, envvar="BRIDGE_MCP_LABEL", show_envvar=True,
              help="Label of this session's entity (default: the role, e.g. main). Re-attaches to an "
                   "existing hold entity with that label, so replies held for an earlier session are kept.")
@click.option("--role", "-r", type=click.Choice(["main", "orchestrator"]), default="main", show_default=True,
              help="The entity's role in the roster.")
@click.pass_obj
def mcp(app, label: str | None, role: str) -> None:
    """Run the stdio MCP server for a main or orchestrator session.

    Speaks MCP on stdin/stdout for an MCP client (Claude Code, OpenCode, Codex …). Registers
    (or re-attaches to) an entity with --deliver hold on the local gateway; messages for it
    are held until the client calls bridge_poll, and the client is notified when they arrive.
    Tools: bridge_send, bridge_ask, bridge_reply, bridge_answer, bridge_poll, bridge_roster,
    bridge_spawn, bridge_stop. Needs a running `bridge gateway` and the extra bridgecli[mcp].
    """
    _check_sdk()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="bridge mcp: %(levelname)s: %(message)s")
    from bridgecli.mcp.link import GatewayLink, SessionLock

    link = GatewayLink()
    link.attach(label or role, role)  # raises GatewayUnavailable before any protocol traffic
    lock = SessionLock(link.gid)
    lock.acquire(link.label)  # held until the process exits
    nudge_after = float(app.config.values["messaging.nudge_after"])

    import anyio

    from bridgecli.mcp.server import serve

    anyio.run(serve, link, nudge_after)


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
