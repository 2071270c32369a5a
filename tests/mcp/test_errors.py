"""Every failure of ``bridge mcp`` reaches the client as one line: a tool error (isError) for
a failed call. A missing gateway or a taken label does not stop the server from starting
(tests/mcp/test_sessions.py)."""

from __future__ import annotations

import anyio

from tests.mcp.conftest import mcp_client, text_of

FAST = {"BRIDGE_ROSTER_INTERVAL": "0.5"}


def assert_tool_error(result, *needles: str) -> str:
    text = text_of(result)
    assert result.is_error, text
    assert "Traceback" not in text and "\n" not in text.strip(), text
    for needle in needles:
        assert needle in text, text
    return text


def test_call_errors_are_one_line_tool_errors(gw_host, label):
    gw_host.register(f"q{label}")  # holds what it gets and never answers

    async def scenario():
        async with mcp_client(gw_host, label) as (session, _):
            assert_tool_error(
                await session.call_tool("bridge_send", {"target": "nobody-here", "content": "x"}), "nobody-here"
            )
            assert_tool_error(
                await session.call_tool("bridge_ask", {"target": "nobody-here", "question": "x"}), "nobody-here"
            )
            assert_tool_error(await session.call_tool("bridge_send", {"target": label}), "bad arguments", "content")
            assert_tool_error(await session.call_tool("bridge_poll", {"wait": -1}), "bad arguments", "wait")
            assert_tool_error(
                await session.call_tool("bridge_reply", {"msg_id": "0123456789ab", "content": "x"}),
                "no message '0123456789ab'",
            )
            assert_tool_error(
                await session.call_tool("bridge_answer", {"msg_id": "0123456789ab", "content": "x"}),
                "no message '0123456789ab'",
            )
            # an ask whose wait runs out: sent all the same, and the hint says where its answer goes
            timed_out = assert_tool_error(
                await session.call_tool("bridge_ask", {"target": f"q{label}", "question": "anyone?", "wait": 1}),
                "no reply to ",
                "within 1s",
                "collect it later with bridge_poll",
            )
            assert timed_out.startswith("no reply to ")
            assert_tool_error(await session.call_tool("bridge_nope", {}), "unknown tool")
            assert_tool_error(
                await session.call_tool("bridge_spawn", {"profile": "echo", "host": "nowhere"}), "nowhere"
            )
            assert_tool_error(await session.call_tool("bridge_stop", {"target": "nobody-here"}), "nobody-here")
            return timed_out.split()[3]

    asked = anyio.run(scenario)
    [question] = gw_host.bridge_json("poll", "--as", f"q{label}", "--wait", "30")["messages"]  # it went out
    assert question["kind"] == "ASK" and question["msgId"] == asked and question["content"] == "anyone?"


def test_ambiguous_label_lists_the_candidates(host_factory):
    """Two entities called the same on two hosts: a label is then ambiguous (needs the roster)."""
    a, b = host_factory("a", extra_env=FAST), host_factory("b", extra_env=FAST)
    a.start_gateway(timeout=90), b.start_gateway(timeout=90)
    a.register("twin"), b.register("twin")

    async def scenario():
        async with mcp_client(a, "main") as (session, _):
            import time

            deadline = time.monotonic() + 30
            while True:
                result = await session.call_tool("bridge_send", {"target": "twin", "content": "x"})
                if "matches 2" in text_of(result) or time.monotonic() > deadline:
                    break
                await anyio.sleep(0.5)
            assert_tool_error(result, "'twin' matches 2", a.name, b.name)

    anyio.run(scenario)


def test_gateway_killed_mid_session_then_back(host_factory):
    host = host_factory("k")
    host.start_gateway(timeout=90)
    host.register("shell")

    async def scenario():
        async with mcp_client(host, "main") as (session, pushed):
            host.kill_gateway()
            assert_tool_error(await session.call_tool("bridge_send", {"target": "shell", "content": "x"}), "gateway")
            assert_tool_error(await session.call_tool("bridge_poll", {}), "gateway")
            await anyio.to_thread.run_sync(lambda: host.start_gateway(timeout=90))
            # the same MCP server keeps working, push included, once the gateway is back
            host.bridge("send", "main", "after restart", "--from", "shell", check=True)
            await pushed.wait_channel("arrived")
            result = await session.call_tool("bridge_poll", {"wait": 10})
            assert not result.is_error, text_of(result)
            assert [m["content"] for m in result.structured_content["messages"]] == ["after restart"]

    anyio.run(scenario)
