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
    a.start_gateway(), b.start_gateway()

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

            spawned = await session.call_tool("bridge_spawn", {"profile": "echo", "host": b.name, "label": "rev1",
                                                               "wait_ready": 20})
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
