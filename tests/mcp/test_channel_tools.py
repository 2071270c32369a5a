"""The channel tools of ``bridge mcp`` end to end: the SDK's stdio client, a real gateway,
the real broker. A session joins, receives a channel's copy, sends to ``#NAME``, lists and
leaves; leaving a channel it is not in is a tool error that says so."""

from __future__ import annotations

import anyio

from tests.mcp.conftest import mcp_client, text_of


def test_a_session_joins_hears_sends_lists_and_leaves(gw_host, label):
    channel = f"c{label}"
    peer = f"p{label}"
    gw_host.register(peer, role="main")
    gw_host.bridge_json("channel", "join", channel, "--as", peer)

    async def scenario():
        async with mcp_client(gw_host, label) as (session, _):
            joined = await session.call_tool("bridge_channel_join", {"name": f"#{channel}"})
            assert not joined.is_error, text_of(joined)
            assert joined.structured_content["joined"] is True
            listed = await session.call_tool("bridge_channel_list", {"name": channel})
            members = {m["label"] for m in listed.structured_content["channels"][0]["members"]}
            assert members == {label, peer}
            gw_host.bridge_json("send", f"#{channel}", "hello <b>team</b>", "--from", peer)
            polled = await session.call_tool("bridge_poll", {"wait": 20})
            [message] = polled.structured_content["messages"]
            assert message["content"] == "hello <b>team</b>" and message["channel"] == channel
            sent = await session.call_tool("bridge_send", {"target": f"#{channel}", "content": "ack from mcp"})
            assert not sent.is_error, text_of(sent)
            left = await session.call_tool("bridge_channel_leave", {"name": channel})
            assert not left.is_error, text_of(left)
            again = await session.call_tool("bridge_channel_leave", {"name": channel})
            assert again.is_error and f"not in channel #{channel}" in text_of(again)
            bad = await session.call_tool("bridge_channel_join", {"name": "No Spaces"})
            assert bad.is_error and "is not a channel name" in text_of(bad)

    anyio.run(scenario)
    got = gw_host.bridge_json("poll", "--as", peer, "--wait", "10s")["messages"]
    assert [m["content"] for m in got] == ["ack from mcp"]
