"""``bridge mcp`` end to end: the SDK's stdio client, a real gateway, the real broker."""

from __future__ import annotations

import json
import sys

import anyio

from tests.mcp.conftest import mcp_client, text_of
from tests.support.env import BRIDGE_BIN

TOOLS = {"bridge_send", "bridge_ask", "bridge_reply", "bridge_answer", "bridge_poll", "bridge_roster",
         "bridge_spawn", "bridge_stop"}


def echo_worker(host, label: str, gate: str | None = None) -> str:
    """A worker on the exec backend that answers every message with ``pong: <content>``
    through the real ``bridge reply $BRIDGE_MSG_ID`` (once the file ``gate`` exists, if given).

    The reply runs detached, after the exec command returned: the gateway records a message
    as received only once its backend confirmed it, and `bridge reply` looks the original up
    in that record (so a reply from *inside* the exec command finds nothing yet)."""
    wait = f'while [ ! -e "{gate}" ]; do sleep 0.1; done; ' if gate else ""
    content = f"{sys.executable} -c 'import json,sys; print(json.load(sys.stdin)[\"content\"])'"
    reply = f'{BRIDGE_BIN} reply "$BRIDGE_MSG_ID" "pong: $text"'
    command = (f'text=$({content}); ( {wait}for i in $(seq 300); do {reply} && exit 0; sleep 0.1; done ) '
               '>/dev/null 2>&1 </dev/null &')
    return host.register(label, deliver=f"exec:{command}")


def test_tools_are_listed_with_schemas(gw_host, label):
    async def scenario():
        async with mcp_client(gw_host, label) as (session, _):
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == TOOLS
            for tool in tools.values():
                assert tool.description and len(tool.description) > 40
                assert tool.input_schema["type"] == "object"
                assert tool.input_schema.get("additionalProperties") is False
            assert tools["bridge_send"].input_schema["required"] == ["target", "content"]
            assert tools["bridge_send"].input_schema["properties"]["wait"]["type"] == "number"
            assert tools["bridge_ask"].input_schema["required"] == ["target", "question"]
            assert tools["bridge_reply"].input_schema["required"] == ["msg_id", "content"]
            assert tools["bridge_answer"].input_schema["required"] == ["msg_id", "content"]
            assert tools["bridge_poll"].input_schema["required"] == []
            assert tools["bridge_spawn"].input_schema["required"] == ["profile", "host"]
            assert tools["bridge_stop"].input_schema["required"] == ["target"]
            caps = session.server_capabilities
            assert caps.experimental and "claude/channel" in caps.experimental
            resources = (await session.list_resources()).resources
            assert [str(r.uri) for r in resources] == ["bridge://inbox"]

    anyio.run(scenario)
    entity = [e for e in gw_host.bridge_json("entities")["entities"] if e["label"] == label][0]
    assert entity["deliver"] == "hold" and entity["role"] == "main"


def test_u1_send_waits_for_the_workers_reply(gw_host, label):
    echo_worker(gw_host, f"w{label}")

    async def scenario():
        async with mcp_client(gw_host, label) as (session, _):
            result = await session.call_tool("bridge_send", {"target": f"w{label}", "content": "ping 1", "wait": 30})
            assert not result.is_error, text_of(result)
            reply = result.structured_content["reply"]
            assert reply["kind"] == "REPLY" and reply["content"].strip() == "pong: ping 1"
            assert reply["inReplyTo"] == result.structured_content["msgId"]
            assert "pong: ping 1" in text_of(result)

    anyio.run(scenario)
