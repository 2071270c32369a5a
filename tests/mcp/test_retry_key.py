"""``key`` on the MCP send tools: the SDK's stdio client, a real gateway, the real broker."""

from __future__ import annotations

import anyio

from tests.mcp.conftest import mcp_client, text_of


def test_a_tool_call_repeated_with_the_same_key_is_delivered_once(gw_host, label):
    worker = gw_host.register(f"w{label}")

    async def scenario() -> list[str]:
        async with mcp_client(gw_host, label) as (session, _):
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            for name in ("bridge_send", "bridge_ask", "bridge_reply", "bridge_answer"):
                assert tools[name].input_schema["properties"]["key"]["maxLength"] == 128
            ids = []
            for content in ("build it", "build it (again)", "last"):
                key = {"key": "build-7"} if content != "last" else {}
                result = await session.call_tool("bridge_send", {"target": worker, "content": content, **key})
                assert not result.is_error, text_of(result)
                ids.append(result.structured_content["msgId"])
            return ids

    first, again, last = anyio.run(scenario)
    assert first == again != last
    got: list[tuple[str, str]] = []
    while last not in [msg_id for msg_id, _ in got]:  # one FIFO inbox: by "last", the repeat was dropped
        messages = gw_host.bridge_json("poll", "--as", worker, "--wait", "20s")["messages"]
        assert messages, f"nothing more arrived; so far {got}"
        got += [(m["msgId"], m["content"]) for m in messages]
    assert got == [(first, "build it"), (last, "last")]
