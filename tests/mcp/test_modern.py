"""A client on the 2026-07-28 protocol revision (the SDK's ``Client`` in its default "auto"
mode discovers the server and speaks it): tools work, and held messages are announced both by
the Claude channel event and by ``resources/updated`` on the client's ``subscriptions/listen``
stream — that revision's only way to a resource's change notices."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.client.subscriptions import ResourceUpdated

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

        return (
            NotificationBinding(method="notifications/claude/channel", params_type=ChannelParams, handler=on_channel),
        )


def test_modern_client_hears_arrivals_on_its_listen_stream(gw_host, label):
    shell = f"s{label}"
    gw_host.register(shell)
    seen: list[ChannelParams] = []
    changed = [anyio.Event()]

    async def scenario():
        params = StdioServerParameters(command=BRIDGE_BIN, args=["mcp", "--label", label], env=gw_host.env)
        async with Client(params, extensions=[ChannelWatch(seen, changed)]) as client:
            assert client.session.protocol_version == "2026-07-28"
            assert client.server_capabilities.resources.subscribe  # served through subscriptions/listen
            async with client.listen(resource_subscriptions=["bridge://inbox"]) as inbox:
                assert inbox.honored.resource_subscriptions == ["bridge://inbox"]
                gw_host.bridge("send", label, "modern hello", "--from", shell, check=True)
                with anyio.fail_after(45):
                    assert await inbox.__anext__() == ResourceUpdated(uri="bridge://inbox")
                    while not any(c.meta.get("kind") == "arrived" for c in seen):
                        changed[0] = anyio.Event()
                        await changed[0].wait()
                state = await client.read_resource("bridge://inbox")
                assert json.loads(state.contents[0].text)["held"] == 1
                tools = {t.name for t in (await client.list_tools()).tools}
                assert "bridge_poll" in tools
                result = await client.call_tool("bridge_poll", {"wait": 10})
                assert not result.is_error, text_of(result)
                assert [m["content"] for m in result.structured_content["messages"]] == ["modern hello"]

    anyio.run(scenario)


def test_listen_as_the_first_request_starts_the_watch(gw_host, label):
    """A client pinned to the revision skips the discover probe, so its listen stream, which
    lasts as long as the subscription, may be the only request it has sent."""
    shell = f"s{label}"
    gw_host.register(shell)

    async def scenario():
        params = StdioServerParameters(command=BRIDGE_BIN, args=["mcp", "--label", label], env=gw_host.env)
        async with Client(params, mode="2026-07-28") as client:
            async with client.listen(resource_subscriptions=["bridge://inbox"]) as inbox:
                gw_host.bridge("send", label, "first hello", "--from", shell, check=True)
                with anyio.fail_after(45):
                    assert await inbox.__anext__() == ResourceUpdated(uri="bridge://inbox")

    anyio.run(scenario)
