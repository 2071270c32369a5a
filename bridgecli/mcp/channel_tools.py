"""The channel tools of ``bridge mcp``: ``bridge_channel_join``, ``bridge_channel_leave`` and
``bridge_channel_list``.

Join and leave act for this session's own entity (``link.gid``), through the gateway's
``channel_join``/``channel_leave`` operations, as ``bridge channel`` does in a shell; a
message to every member is a ``bridge_send`` to ``#NAME``. Member labels come from other
hosts, so they are shown sanitised.
"""

from __future__ import annotations

from typing import Any

from bridgecli.mcp.link import GatewayLink
from bridgecli.mcp.tools import Tool, ToolResult, object_schema
from bridgecli.requests import ChannelListRequest, ChannelRequest, LeaveRequest
from bridgecli.sanitize import sanitize_line

_NAME = {
    "type": "string",
    "minLength": 1,
    "maxLength": 64,
    "description": 'The channel\'s name, e.g. "reviewers" (a leading # is fine): lower-case letters, digits, '
    "'-' and '_'.",
}


def tools(link: GatewayLink) -> list[Tool]:
    """The channel tools, bound to ``link``'s entity (registered with the messaging tools)."""

    async def join(args: dict[str, Any]) -> ToolResult:
        request = ChannelRequest(name=args["name"], member=link.gid)
        answer = await link.call(request.OP, **request.to_wire())
        name = answer["channel"]
        text = f"You joined #{name}." if answer["joined"] else f"You were already in #{name}."
        return ToolResult(text + f" Messages sent to #{name} now reach you once each.", _data(answer))

    async def leave(args: dict[str, Any]) -> ToolResult:
        request = LeaveRequest(name=args["name"], member=link.gid)
        answer = await link.call(request.OP, **request.to_wire())
        return ToolResult(f"You left #{answer['channel']}.", _data(answer))

    async def listing(args: dict[str, Any]) -> ToolResult:
        request = ChannelListRequest(name=args.get("name") or None)
        answer = await link.call(request.OP, **request.to_wire())
        channels = answer["channels"]
        if not channels:
            return ToolResult("No channels yet: bridge_channel_join makes one.", {"channels": []})
        lines = []
        for found in channels:
            members = ", ".join(
                f"{sanitize_line(str(m['label']), max_chars=64)}@{sanitize_line(str(m['host']), max_chars=64)}"
                for m in found["members"]
            )
            lines.append(f"#{found['name']} ({len(found['members'])}): {members or 'no members'}")
        return ToolResult("\n".join(lines), {"channels": channels})

    return [
        Tool(
            "bridge_channel_join",
            'Join a channel: every message anyone sends to #NAME (bridge_send with target "#NAME") then '
            "reaches you once, like a direct message. Channels are open: any agent may join any channel.",
            object_schema({"name": _NAME}, ["name"]),
            join,
            title="Join a channel",
        ),
        Tool(
            "bridge_channel_leave",
            "Leave a channel you joined: its messages stop reaching you. An error if you are not in it.",
            object_schema({"name": _NAME}, ["name"]),
            leave,
            title="Leave a channel",
        ),
        Tool(
            "bridge_channel_list",
            "List the channels and their members on every host (only one channel's when name is given). "
            "Reading it changes nothing.",
            object_schema({"name": _NAME}, []),
            listing,
            title="List channels",
            read_only=True,
        ),
    ]


def _data(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: answer[key] for key in ("channel", "member", "joined") if key in answer}
