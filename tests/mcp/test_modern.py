"""A client on the 2026-07-28 protocol revision (the SDK's ``Client`` in its default "auto"
mode discovers the server and speaks it): tools work, and the Claude channel event still
announces held messages — the one push channel that revision leaves on a stdio connection."""

from __future__ import annotations

from typing import Any, Sequence

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClientExtension, NotificationBinding

from tests.mcp.conftest import ChannelParams, text_of
from tests.support.env import BRIDGE_BIN


class ChannelWatch(ClientExtension):
    identifier = "com.example/bridge-channel-watch"

    def __init__(self, seen: list[ChannelParams], changed: list[anyio.Event]) -> None:
        self.seen, self.changed = seen, changed

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        async def on_channel(params: ChannelParams) -> None:
            self.seen.append(params)
            self.changed[0].set()

        return (NotificationBinding(method="notifications/claude/channel", params_type=ChannelParams,
                                    handler=on_channel),)


def test_modern_client_gets_tools_and_the_channel_event(gw_host, label):
    shell = f"s{label}"
    gw_host.register(shell)
    seen: list[ChannelParams] = []
    changed = [anyio.Event()]

    async def scenario():
        params = StdioServerParameters(command=BRIDGE_BIN, args=["mcp", "--label", label], env=gw_host.env)
        async with Client(params, extensions=[ChannelWatch(seen, changed)]) as client:
            assert client.session.protocol_version == "2026-07-28"
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "bridge_poll" in tools
            first = await client.call_tool("bridge_poll", {})  # this revision has no "initialized": requests start push
            assert not first.is_error, text_of(first)
            gw_host.bridge("send", label, "modern hello", "--from", shell, check=True)
            with anyio.fail_after(45):
                while not any(c.meta.get("kind") == "arrived" for c in seen):
                    changed[0] = anyio.Event()
                    await changed[0].wait()
            result = await client.call_tool("bridge_poll", {"wait": 10})
            assert [m["content"] for m in result.structured_content["messages"]] == ["modern hello"]

    anyio.run(scenario)
