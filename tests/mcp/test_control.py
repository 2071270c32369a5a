"""Roster, spawn and stop through ``bridge mcp`` (U4/U5 from an MCP main), on two real hosts."""

from __future__ import annotations

import time

import anyio

from tests.mcp.conftest import mcp_client, text_of

FAST = {"BRIDGE_ROSTER_INTERVAL": "0.5"}


def test_roster_spawn_send_stop_from_an_mcp_main(host_factory, tmp_path):
    a, b = host_factory("a", extra_env=FAST), host_factory("b", extra_env=FAST)
    b.write_config("""
[profiles.echo]
launcher = "subprocess"
command = "echo READY; exec sleep 300"
ready_line = "^READY$"
""")
    b.register("beta")
    a.start_gateway(timeout=90), b.start_gateway(timeout=90)

    async def scenario():
        async with mcp_client(a, "main") as (session, _):
            deadline = time.monotonic() + 30
            while True:
                roster = await session.call_tool("bridge_roster", {})
                assert not roster.is_error, text_of(roster)
                seen = {(e["label"], e["host"]) for e in roster.structured_content["entries"]}
                if {("main", a.name), ("beta", b.name)} <= seen or time.monotonic() > deadline:
                    break
                await anyio.sleep(0.3)
            assert {("main", a.name), ("beta", b.name)} <= seen
            assert f"beta | {b.name} | agent" in text_of(roster)

            spawned = await session.call_tool(
                "bridge_spawn", {"profile": "echo", "host": b.name, "label": "rev1", "wait_ready": 20}
            )
            assert not spawned.is_error, text_of(spawned)
            handle = spawned.structured_content
            assert handle["host"] == b.name and handle["label"] == "rev1"

            sent = await session.call_tool("bridge_send", {"target": handle["gid"], "content": "first task"})
            assert not sent.is_error, text_of(sent)
            got = b.bridge_json("poll", "--as", handle["gid"], "--wait", "10s")["messages"]
            assert [m["content"] for m in got] == ["first task"] and got[0]["fromLabel"] == "main"

            stopped = await session.call_tool("bridge_stop", {"target": handle["gid"]})
            assert not stopped.is_error, text_of(stopped)
            assert stopped.structured_content["process_stopped"] is True

            missing = await session.call_tool("bridge_spawn", {"profile": "nope", "host": b.name})
            assert missing.is_error and "profiles: echo" in text_of(missing)

    anyio.run(scenario)


def test_u6_main_pair_across_two_hosts(host_factory):
    """Two mains, each an MCP session on its own host, message each other by label."""
    a, b = host_factory("a", extra_env=FAST), host_factory("b", extra_env=FAST)
    a.start_gateway(timeout=90), b.start_gateway(timeout=90)

    async def scenario():
        async with mcp_client(a, "opus") as (opus, _), mcp_client(b, "cloud") as (cloud, cloud_pushed):
            deadline = time.monotonic() + 30  # each label resolves through the union roster
            while True:
                entries = (await opus.call_tool("bridge_roster", {})).structured_content["entries"]
                if any(e["label"] == "cloud" for e in entries) or time.monotonic() > deadline:
                    break
                await anyio.sleep(0.3)
            results = {}

            async def opus_sends():
                results["send"] = await opus.call_tool(
                    "bridge_send", {"target": "cloud", "content": "plan?", "wait": 40}
                )

            async def cloud_replies():
                await cloud_pushed.wait_channel("arrived")
                [message] = (await cloud.call_tool("bridge_poll", {})).structured_content["messages"]
                assert (message["fromLabel"], message["fromHost"]) == ("opus", a.name)
                await cloud.call_tool("bridge_reply", {"msg_id": message["msgId"], "content": "ship it"})

            async with anyio.create_task_group() as group:
                group.start_soon(opus_sends)
                group.start_soon(cloud_replies)
            send = results["send"]
            assert not send.is_error, text_of(send)
            reply = send.structured_content["reply"]
            assert (reply["content"], reply["fromLabel"], reply["fromHost"]) == ("ship it", "cloud", b.name)

    anyio.run(scenario)
