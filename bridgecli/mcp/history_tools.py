"""The history tools of ``bridge mcp``: ``bridge_history`` and ``bridge_search``.

Both read the gateway's message archive (op ``history``, docs/history.md) for this session's
own entity only (``link.gid``): what it sent and received, newest first. ``bridge_search`` is
the same with a required query. The server's own reminder messages are left out, as
``bridge_poll`` leaves them out.
"""

from __future__ import annotations

import datetime
from typing import Any

from bridgecli.mcp import render
from bridgecli.mcp.link import GatewayLink
from bridgecli.mcp.push import is_nudge
from bridgecli.mcp.tools import Tool, ToolResult, object_schema
from bridgecli.requests import HistoryRequest
from bridgecli.results import ArchivedMessage, HistoryResult
from bridgecli.sanitize import sanitize, sanitize_line

_FILTERS: dict[str, Any] = {
    "with": {
        "type": "string",
        "minLength": 1,
        "maxLength": 64,
        "description": "Only the messages exchanged with this agent or session (a label or gid).",
    },
    "channel": {
        "type": "string",
        "minLength": 1,
        "maxLength": 64,
        "description": 'Only the messages of this channel (its name, e.g. "reviewers").',
    },
    "since": {
        "type": "number",
        "minimum": 0,
        "description": "Only the messages of the last this many seconds.",
    },
    "limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": 1000,
        "description": "Most messages to return (default 20).",
    },
}
_QUERY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 1000,
    "description": "Words that must all appear in the message or its sender's label; a word ending in * "
    "matches as a prefix (deplo* finds deploy and deployed). Punctuation and operators are plain text.",
}


#: extra rows asked for beyond twice the limit, so the reminders left out leave enough
NUDGE_ROOM = 20


def tools(link: GatewayLink) -> list[Tool]:
    """The history tools, bound to ``link``'s entity (registered with the messaging tools)."""

    async def history(args: dict[str, Any], search: str | None) -> ToolResult:
        limit = int(args.get("limit") or 20)
        request = HistoryRequest(
            as_gid=link.gid,
            with_=args.get("with") or None,
            channel=args.get("channel") or None,
            search=search,
            since=args.get("since"),
            # the server's own reminders are archived too and left out below: ask for room
            limit=min(1000, 2 * limit + NUDGE_ROOM),
        )
        result = HistoryResult.from_wire(await link.call(request.OP, timeout=30, **request.to_wire()))
        messages = [m for m in result.messages if not is_nudge(m.to_wire(), link.gid)][:limit]
        data = {"messages": [m.to_wire() for m in messages]}
        if not messages:
            return ToolResult("No archived message matches." if search else "No archived messages.", data)
        head = f"{len(messages)} message{'s' if len(messages) != 1 else ''}, newest first (sent and received):"
        return ToolResult(head + "\n\n" + "\n\n".join(frame(m) for m in messages), data)

    async def bridge_history(args: dict[str, Any]) -> ToolResult:
        return await history(args, None)

    async def bridge_search(args: dict[str, Any]) -> ToolResult:
        return await history(args, args["query"])

    return [
        Tool(
            "bridge_history",
            "Your message history: what you sent and received, newest first, from the archive this host "
            "keeps — also messages already collected with bridge_poll. Filter by peer, channel or time. "
            "Reading it changes nothing.",
            object_schema(_FILTERS, []),
            bridge_history,
            title="Message history",
            read_only=True,
        ),
        Tool(
            "bridge_search",
            "Search your message history (sent and received) for words, newest first: e.g. to find what a "
            "peer said about a topic earlier. Same filters as bridge_history.",
            object_schema({"query": _QUERY, **_FILTERS}, ["query"]),
            bridge_search,
            title="Search messages",
            read_only=True,
        ),
    ]


def frame(message: ArchivedMessage) -> str:
    """One archived message framed as :func:`.render.frame` frames a new one (content behind
    the gutter, so it cannot pass for a frame line), with its direction and date."""
    when = datetime.datetime.fromtimestamp(message.ts).strftime("%Y-%m-%d %H:%M:%S")
    if message.direction == "sent":
        to = f"#{message.channel}" if message.channel else str(message.recipient)[:13]
        header = f"[bridge history] sent {message.kind} to {sanitize_line(to, max_chars=80)}"
    else:
        header = f"[bridge history] received {message.kind} from {render.sender(message)}"
        if message.channel:
            header += f" on #{sanitize_line(message.channel, max_chars=64)}"
    header += f" at {when} · msg {message.msg_id}"
    if message.in_reply_to:
        header += f" (re {message.in_reply_to})"
    lines = [header, *(render.GUTTER + line for line in sanitize(str(message.content)).split("\n")), "[end bridge]"]
    return "\n".join(lines)
