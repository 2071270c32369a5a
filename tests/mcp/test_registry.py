"""The protocol-free parts of ``bridge mcp``: the tool registry's error contract and the
push texts. No broker or MCP client needed."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from bridgecli.errors import NotFound
from bridgecli.mcp.push import NUDGE_TURN, InboxEvent, is_nudge
from bridgecli.mcp.tools import Tool, ToolRegistry, ToolResult

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 1}},
    "required": ["n"],
    "additionalProperties": False,
}


def _registry() -> ToolRegistry:
    async def ok(args):
        return ToolResult(f"got {args['n']}", {"n": args["n"]})

    async def missing(args):
        raise NotFound("no entity 'x'", "check bridge_roster")

    async def buggy(args):
        raise KeyError("oops")

    registry = ToolRegistry()
    for name, handler in (("ok", ok), ("missing", missing), ("buggy", buggy)):
        registry.add(Tool(name, f"{name} tool", SCHEMA, handler))
    return registry


def test_registry_turns_every_failure_into_one_line():
    registry = _registry()
    call = lambda name, args: anyio.run(registry.call, name, args)  # noqa: E731
    assert call("ok", {"n": 2}) == ToolResult("got 2", {"n": 2})
    assert call("ok", {"n": 0}) == ToolResult("bad arguments for ok: n: 0 is less than the minimum of 1", is_error=True)
    assert call("ok", {"n": 1, "x": 1}).is_error
    assert call("missing", {"n": 1}) == ToolResult("no entity 'x' — check bridge_roster", is_error=True)
    bug = call("buggy", {"n": 1})
    assert bug.is_error and "KeyError" in bug.text and "Traceback" not in bug.text and "\n" not in bug.text
    assert call("nope", {}).text == "unknown tool 'nope' — available: ok, missing, buggy"
    with pytest.raises(ValueError, match="twice"):
        registry.add(Tool("ok", "again", SCHEMA, registry.tools["ok"].handler))


def test_push_texts_and_nudge_marker():
    assert (
        InboxEvent("arrived", held=2, new=1).text("main")
        == "2 bridge messages are held for main (1 new). Call bridge_poll to read them."
    )
    assert (
        InboxEvent("reminder", held=1, waited=301.2).text("main")
        == "Reminder: 1 bridge message is still held for main for 301s. Call bridge_poll to read them."
    )
    assert is_nudge({"from": "g", "turn": NUDGE_TURN}, "g")
    assert not is_nudge({"from": "other", "turn": NUDGE_TURN}, "g")
    assert not is_nudge({"from": "g", "turn": None}, "g")


def test_reminders_back_off():
    from bridgecli.mcp.link import GatewayLink
    from bridgecli.mcp.push import InboxWatcher

    async def quiet(event):
        pass

    watcher = InboxWatcher(GatewayLink(), quiet, nudge_after=300)
    delays = []
    for count in range(9):
        watcher._reminders = count
        delays.append(watcher.nudge_delay())
    assert delays == [300, 600, 1200, 2400, 4800, 9600, 19200, 19200, 19200]


def test_mcp_help_does_not_import_the_sdk(bridge_home):
    probe = (
        "import sys\nfrom bridgecli.cli import main\n"
        "try:\n    main(['mcp', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('mcp' in sys.modules, 'pika' in sys.modules, file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], env=bridge_home.env, capture_output=True, text=True, timeout=60
    )
    assert proc.stderr.strip().splitlines()[-1] == "False False", proc.stderr
    assert "bridge_poll" in proc.stdout
