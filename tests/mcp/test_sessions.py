"""``bridge mcp`` always connects, and many sessions share a host: the SDK's stdio client
against the real server, a real gateway subprocess and the real broker.

MCP clients never restart a server that failed at start (Claude Code marks it failed for the
session's life), and one user-scope entry is run by every session on the host, and by each
``claude mcp list`` health check. So the server completes the handshake without a gateway and
attaches once one runs, and sessions without ``--label`` are named after their directory, a
second live one in the same directory taking a numbered slot that later sessions reuse."""

from __future__ import annotations

import re
import time
from pathlib import Path

import anyio

from tests.mcp.conftest import Pushed, mcp_client, text_of
from tests.mcp.test_errors import assert_tool_error
from tests.mcp.test_messaging import TOOLS
from tests.support.hosts import Host

#: start/handshake/stop cycles of a health check in one directory. 100 were measured once
#: (still two entities; 167 s on a loaded 2-core VM, so the suite runs fewer)
CYCLES = 30


def label_of(pushed: Pushed) -> str:
    """The label the server's instructions give the session."""
    found = re.search(r"Your bridge label is '([^']+)'", pushed.instructions)
    assert found, f"the instructions name no label: {pushed.instructions!r}"
    return found.group(1)


async def send_when_attached(host: Host, target: str, text: str, sender: str, timeout: float = 60) -> None:
    """``bridge send TARGET TEXT --from SENDER``, retried until the session's entity exists
    (it is attached in the background, so the first tries may find no such label)."""

    def send() -> None:
        deadline = time.monotonic() + timeout
        while True:
            proc = host.bridge("send", target, text, "--from", sender)
            if proc.returncode == 0:
                return
            assert time.monotonic() < deadline, f"could not send to {target}: {proc.stderr}"
            time.sleep(0.3)

    await anyio.to_thread.run_sync(send)


async def poll_contents(session, wait: float = 30) -> list[str]:
    result = await session.call_tool("bridge_poll", {"wait": wait})
    assert not result.is_error, text_of(result)
    return [m["content"] for m in result.structured_content["messages"]]


def entities_of(host: Host, base: str) -> list[dict]:
    return [e for e in host.bridge_json("entities")["entities"] if e["label"].startswith(base)]


def test_connects_without_a_gateway_and_attaches_once_it_runs(host_factory):
    host = host_factory("late")
    host.register("shell")  # the registry works without a gateway
    project = host.root / "late-project"
    project.mkdir()

    async def scenario():
        async with mcp_client(host, None, cwd=project) as (session, pushed):
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS
            label = label_of(pushed)
            assert label.startswith("late-project-")
            for tool in ("bridge_poll", "bridge_reply", "bridge_ask", "bridge_answer"):
                assert tool in pushed.instructions
            for tool, args in (("bridge_poll", {}), ("bridge_send", {"target": "shell", "content": "x"})):
                text = assert_tool_error(await session.call_tool(tool, args), "start it: bridge gateway")
                assert "not connected" in text
            await anyio.to_thread.run_sync(lambda: host.start_gateway(timeout=90))
            # no tool call, no restart: the server attaches by itself and announces the arrival
            await send_when_attached(host, label, "you are on", "shell")
            await pushed.wait_channel("arrived", timeout=60)
            assert await poll_contents(session) == ["you are on"]
            return label

    label = anyio.run(scenario)
    [entity] = entities_of(host, label)
    assert entity["deliver"] == "hold" and entity["role"] == "main"


def test_two_sessions_in_one_directory_get_their_own_identities(gw_host):
    project = gw_host.root / "two sessions"
    project.mkdir()
    gw_host.register("shell2")

    async def scenario():
        async with mcp_client(gw_host, None, cwd=project) as (first, pushed1):
            async with mcp_client(gw_host, None, cwd=project) as (second, pushed2):
                one, two = label_of(pushed1), label_of(pushed2)
                assert one.startswith("two-sessions-") and two == f"{one}-2"
                assert "served by another live bridge mcp session" in pushed2.instructions
                for label in (one, two):
                    await send_when_attached(gw_host, label, f"for {label}", "shell2")
                assert await poll_contents(first) == [f"for {one}"]
                assert await poll_contents(second) == [f"for {two}"]
        # the next session there is the first one again: what was held for it is still there
        await send_when_attached(gw_host, one, "while away", "shell2")
        async with mcp_client(gw_host, None, cwd=project) as (again, pushed):
            assert label_of(pushed) == one
            assert await poll_contents(again) == ["while away"]

    anyio.run(scenario)


def test_health_checks_do_not_pile_up_entities(gw_host):
    """A live session, and a client that starts the server again and again meanwhile (the
    start, handshake and stop of ``claude mcp list``), all in one directory."""
    project = gw_host.root / "churn"
    project.mkdir()

    async def scenario() -> tuple[str, set[str]]:
        seen: set[str] = set()
        async with mcp_client(gw_host, None, cwd=project) as (live, pushed):
            base = label_of(pushed)
            assert await poll_contents(live, wait=0) == []  # attached
            for _ in range(CYCLES // 2):
                async with mcp_client(gw_host, None, cwd=project) as (check, checked):
                    seen.add(label_of(checked))
                    assert not (await check.call_tool("bridge_roster", {})).is_error
        for _ in range(CYCLES - CYCLES // 2):
            async with mcp_client(gw_host, None, cwd=project) as (_, checked):
                seen.add(label_of(checked))
        return base, seen

    base, seen = anyio.run(scenario)
    assert seen == {base, f"{base}-2"}
    labels = sorted(e["label"] for e in entities_of(gw_host, base))
    assert labels == [base, f"{base}-2"], labels


def test_a_pinned_label_served_twice_still_connects(gw_host):
    gw_host.register("shell3")

    async def scenario():
        async with mcp_client(gw_host, "main") as (first, pushed1):
            async with mcp_client(gw_host, "main") as (second, pushed2):
                assert label_of(pushed1) == "main" and label_of(pushed2) == "main-2"
                assert "the label you pinned with --label, 'main', is served by another" in pushed2.instructions
                for label in ("main", "main-2"):
                    await send_when_attached(gw_host, label, f"to {label}", "shell3")
                assert await poll_contents(first) == ["to main"]
                assert await poll_contents(second) == ["to main-2"]
        # the lock goes with the process: the label is free again
        async with mcp_client(gw_host, "main") as (session, pushed):
            assert label_of(pushed) == "main"
            assert not (await session.call_tool("bridge_poll", {})).is_error

    anyio.run(scenario)


def test_a_label_owned_by_another_backend_is_a_tool_error(gw_host, label):
    gw_host.register(label, deliver="exec:cat >/dev/null")

    async def scenario():
        async with mcp_client(gw_host, label) as (session, _):
            assert_tool_error(await session.call_tool("bridge_poll", {}), "not hold", "--label")

    anyio.run(scenario)


def test_stderr_says_which_label(gw_host, tmp_path: Path):
    project = gw_host.root / "logged"
    project.mkdir()
    log = tmp_path / "mcp.log"

    async def scenario() -> str:
        async with mcp_client(gw_host, None, cwd=project, errlog=log) as (_, pushed):
            return label_of(pushed)

    label = anyio.run(scenario)
    assert f"serving label {label}" in log.read_text()
