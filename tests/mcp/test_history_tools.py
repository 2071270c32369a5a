"""``bridge_history`` and ``bridge_search`` through the real ``bridge mcp``: the session's own
messages, sent and received, found after bridge_poll has taken them (docs/history.md)."""

from __future__ import annotations

import anyio

from tests.mcp.conftest import mcp_client, text_of


def test_search_finds_the_sessions_own_messages_both_ways(gw_host, label):
    peer = gw_host.register(f"p{label}")

    async def scenario():
        async with mcp_client(gw_host, label) as (session, _):
            sent = await session.call_tool("bridge_send", {"target": peer, "content": "the quokka report is due"})
            assert not sent.is_error, text_of(sent)
            gw_host.bridge("send", label, "quokka report attached \x1b[31m", "--from", f"p{label}", check=True)
            polled = await session.call_tool("bridge_poll", {"wait": 30})
            assert not polled.is_error, text_of(polled)
            found = await session.call_tool("bridge_search", {"query": "quokka", "with": f"p{label}"})
            assert not found.is_error, text_of(found)
            messages = found.structured_content["messages"]
            assert [m["direction"] for m in messages] == ["received", "sent"]
            assert "\x1b" not in text_of(found) and "│ quokka report attached" in text_of(found)
            hostile = await session.call_tool("bridge_search", {"query": 'quok* "NEAR( -'})
            assert not hostile.is_error and hostile.structured_content["messages"] == []
            recent = await session.call_tool("bridge_history", {"limit": 1})
            assert [m["content"] for m in recent.structured_content["messages"]] == ["quokka report attached \x1b[31m"]

    anyio.run(scenario)
