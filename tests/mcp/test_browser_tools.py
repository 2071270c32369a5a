"""``bridge mcp`` as a browser-bridge adapter, driven by the MCP SDK's stdio client.

Two real ``bridge mcp`` processes of one user (one token file) elect a broker on a private
port, a CDP executor drives a headless Chromium, and pages come from a loopback http.server.
The story: each session opens and drives its own group; the guest is refused on the host's
group with the broker's message until the host releases it; the host is SIGKILLed and the guest takes over, its next
command succeeding after at most a few ``bridge re-electing`` refusals.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from bridgecli.browser import token_file
from bridgecli.mcp import browser_tools
from bridgecli.mcp.browser_tools import BrowserSeat
from bridgecli.mcp.tools import ToolRegistry
from tests.mcp.conftest import text_of
from tests.support.chromium import free_port
from tests.support.env import BRIDGE_BIN

BROWSER_TOOLS = {
    "browser_targets",
    "browser_open",
    "browser_tabs",
    "browser_navigate",
    "browser_click",
    "browser_type",
    "browser_text",
    "browser_snapshot",
    "browser_screenshot",
    "browser_release",
}


def browser_env(home, port: int) -> dict[str, str]:
    """A browser-only `bridge mcp` (no gateway needed) on a private broker port."""
    return dict(home.env, BRIDGE_BROWSER_PORT=str(port), BRIDGE_MCP_MESSAGING="0")


@asynccontextmanager
async def browser_mcp(
    env: dict[str, str], label: str, log: Path, *args: str, inits: list[Any] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized SDK session with a real `bridge mcp`; the SDK stops the process on exit.
    The initialize result is appended to ``inits`` when given."""
    server = StdioServerParameters(command=BRIDGE_BIN, args=["mcp", "--label", label, *args], env=env)
    with open(log, "a") as errlog:
        async with stdio_client(server, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                if inits is not None:
                    inits.append(init)
                yield session


async def call(session: ClientSession, tool: str, **args: Any) -> types.CallToolResult:
    with anyio.fail_after(90):
        return await session.call_tool(tool, args)


async def ok(session: ClientSession, tool: str, **args: Any) -> types.CallToolResult:
    result = await call(session, tool, **args)
    assert not result.is_error, f"{tool} {args} failed: {text_of(result)}"
    return result


async def until(what: str, attempt: Any, timeout: float = 30) -> Any:
    """Retry ``attempt()`` (async, returns something truthy when done) for up to ``timeout``."""
    last: Any = None
    try:
        with anyio.fail_after(timeout):
            while not (last := await attempt()):
                await anyio.sleep(0.2)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what} (last: {last!r})")
    return last


async def mode_of(session: ClientSession) -> str | None:
    result = await call(session, "browser_targets")
    return None if result.is_error else result.structured_content["bridge"]["mode"]


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_two_sessions_share_one_broker_and_survive_the_hosts_death(
    bridge_home, chromium_factory, cdp_executors, page_server
):
    port = free_port()
    env = browser_env(bridge_home, port)
    logs = bridge_home.root

    async def scenario() -> None:
        async with AsyncExitStack() as stack:
            first = await stack.enter_async_context(browser_mcp(env, "first", logs / "first.log"))
            assert await until("the first session to host", lambda: _is(mode_of(first), "host"))
            host_pid = token_file.read()["pid"]  # the host writes its pid next to the token
            second_stack = AsyncExitStack()
            await stack.enter_async_context(second_stack)
            second = await second_stack.enter_async_context(browser_mcp(env, "second", logs / "second.log"))
            assert await until("the second session to join as a guest", lambda: _is(mode_of(second), "guest"))

            chromium = chromium_factory()
            cdp_executors(chromium.endpoint, port, token_file.read()["token"], "ci-chromium")

            async def executor_listed() -> bool:
                rows = (await ok(second, "browser_targets")).structured_content["targets"]
                return [r["label"] for r in rows] == ["ci-chromium"]

            await until("the executor to connect", executor_listed)

            # each session opens and drives its own group
            opened = await ok(first, "browser_open", group="first-grp", url=page_server + "/form.html")
            assert opened.structured_content["tab"]
            await ok(second, "browser_open", group="second-grp", url=page_server + "/other.html")
            await ok(first, "browser_type", group="first-grp", selector="#name", text="Ann")
            await ok(first, "browser_click", group="first-grp", selector="#go")
            assert text_of(await ok(first, "browser_text", group="first-grp", selector="#out")) == "Hello, Ann"
            assert text_of(await ok(second, "browser_text", group="second-grp", selector="#para")) == "the other page"
            assert "Greeter" in text_of(await ok(first, "browser_snapshot", group="first-grp"))
            await ok(second, "browser_navigate", group="second-grp", url=page_server + "/form.html")
            tabs = await ok(second, "browser_tabs", group="second-grp")
            assert "Form page" in text_of(tabs) and "/form.html" in text_of(tabs)

            shot = await ok(second, "browser_screenshot", group="second-grp")
            images = [b for b in shot.content if isinstance(b, types.ImageContent)]
            assert len(images) == 1 and images[0].mime_type == "image/png"
            assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")

            # the guest is refused on the host's group, with the broker's own words
            refused = await call(second, "browser_click", group="first-grp", selector="#go")
            assert refused.is_error and 'group "first-grp" is owned by another client' in text_of(refused)
            owners = (await ok(second, "browser_tabs")).structured_content["groups"]
            assert {g["group"]: g["owner"] for g in owners} == {"first-grp": "other", "second-grp": "you"}
            unknown = await call(
                second, "browser_open", group="third", url=page_server + "/form.html", target="no-such-browser"
            )
            assert unknown.is_error and "no connected browser has id or label 'no-such-browser'" in text_of(unknown)

            # browser_release hands a group over: refused before, the second session's after
            await ok(first, "browser_open", group="handover", url=page_server + "/other.html")
            refused = await call(second, "browser_text", group="handover", selector="#para")
            assert refused.is_error and 'group "handover" is owned by another client' in text_of(refused)
            stolen = await call(second, "browser_release", group="handover")  # only the owner may release
            assert stolen.is_error and 'group "handover" is owned by another client' in text_of(stolen)
            released = await ok(first, "browser_release", group="handover")
            assert text_of(released).startswith("Released group 'handover'")
            assert released.structured_content == {"released": "handover"}
            owners = (await ok(second, "browser_tabs")).structured_content["groups"]
            assert {g["group"]: g["owner"] for g in owners}["handover"] == "orphan"
            assert text_of(await ok(second, "browser_text", group="handover", selector="#para")) == "the other page"
            owners = (await ok(first, "browser_tabs")).structured_content["groups"]
            assert {g["group"]: g["owner"] for g in owners}["handover"] == "other"  # adopted by the second
            taken = await call(first, "browser_text", group="handover", selector="#para")
            assert taken.is_error and 'group "handover" is owned by another client' in text_of(taken)

            # the host dies without a goodbye; the guest re-elects itself and takes over
            os.kill(host_pid, signal.SIGKILL)
            refusals: list[str] = []

            async def next_command_works() -> bool:
                result = await call(second, "browser_text", group="second-grp", selector="h1")
                if result.is_error:
                    refusals.append(text_of(result))
                    return False
                return text_of(result) == "Greeter"

            await until("the guest's next command to succeed", next_command_works)
            # the fail-fast window: re-electing, then (new host, executor not back yet) no such group
            window = ("bridge re-electing", "no group 'second-grp'")
            unexpected = [r for r in refusals if not any(w in r for w in window)]
            assert not unexpected, f"failures other than the re-election window: {unexpected}"
            assert await mode_of(second) == "host"
            assert token_file.read()["pid"] != host_pid
            # the dead session's tabs survived; its group is orphaned and adopted on use
            assert text_of(await ok(second, "browser_text", group="first-grp", selector="#out")) == "Hello, Ann"

            await second_stack.aclose()  # stop the second session cleanly: it leaves the port free
            await until("the port to be released", lambda: _is_async(not listening(port)))
            try:
                await stack.aclose()  # the killed first session: its client just closes
            except Exception:  # noqa: BLE001 - the server is gone; a broken pipe here is expected
                pass

    anyio.run(scenario)


async def _is(value: Any, expected: Any) -> bool:
    return (await value) == expected


async def _is_async(value: bool) -> bool:
    return value


def test_tool_listing_schemas_and_no_browser(bridge_home):
    port = free_port()
    env = browser_env(bridge_home, port)

    async def scenario() -> None:
        inits: list[Any] = []
        async with browser_mcp(env, "lister", bridge_home.root / "lister.log", inits=inits) as session:
            instructions = inits[0].instructions
            assert "without its messaging tools" in instructions and "browser_open creates it" in instructions
            assert "bridge_poll" not in instructions  # no inbox to tell the model about
            listed = await session.list_tools()
            tools = {t.name: t for t in listed.tools}
            assert set(tools) == BROWSER_TOOLS  # --no-messaging (via env): browser tools only
            for tool in tools.values():
                assert tool.description and len(tool.description) > 40
                assert tool.input_schema["type"] == "object"
                assert tool.input_schema["additionalProperties"] is False
            open_ = tools["browser_open"].input_schema
            assert open_["required"] == ["group", "url"] and "target" in open_["properties"]
            assert "Omit it unless several browsers are connected" in open_["properties"]["target"]["description"]
            assert "Omit target unless several browsers are connected" in tools["browser_open"].description
            assert tools["browser_type"].input_schema["required"] == ["group", "selector", "text"]
            assert tools["browser_tabs"].input_schema["required"] == []
            bad = await call(session, "browser_open", group="g")
            assert bad.is_error and "bad arguments for browser_open" in text_of(bad) and "url" in text_of(bad)
            # it won the election on its private port (nobody else was there)
            assert await until("the session to host", lambda: _is(mode_of(session), "host"))
            assert listening(port)
            none = await call(session, "browser_open", group="g", url="http://127.0.0.1:9/")
            assert none.is_error and "no browser is connected to the bridge" in text_of(none)

        other = free_port()
        env_off = dict(browser_env(bridge_home, other), BRIDGE_MCP_BROWSER="1")
        proc = subprocess.run(
            [BRIDGE_BIN, "mcp", "--no-browser", "--no-messaging"],
            env=env_off,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        assert proc.returncode != 0 and proc.stdout == ""
        assert "nothing to serve with both --no-messaging and --no-browser" in proc.stderr
        assert not listening(other)

    anyio.run(scenario)


def test_no_gateway_hint_points_browser_only_users_at_no_messaging(bridge_home):
    """With no gateway the server still starts (and ends at the end of its input); the one
    line it writes names the gateway and, for browser-only users, --no-messaging."""
    proc = subprocess.run(
        [BRIDGE_BIN, "mcp", "--no-browser"],
        env=bridge_home.env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout == ""
    assert "no gateway is listening" in proc.stderr and "bridge mcp --no-messaging" in proc.stderr


def test_missing_browser_extra_is_a_clear_tool_error(monkeypatch):
    """Without websockets/websocket-client the tools stay listed and every call says what to install."""
    monkeypatch.setattr(browser_tools, "EXTRA_MODULES", {"bridgecli_no_such_module": "websockets"})
    seat = BrowserSeat(port=free_port())
    registry = ToolRegistry()
    for tool in browser_tools.tools(seat):
        registry.add(tool)

    async def scenario() -> None:
        await seat.run()  # returns at once: nothing to elect with
        result = await registry.call("browser_targets", {})
        assert result.is_error
        assert result.text == (
            "the browser tools need the extra bridgecli[browser] (websockets not installed) "
            "— pip install 'bridgecli[browser]', then restart bridge mcp"
        )

    anyio.run(scenario)
    assert seat.bridge is None


def test_screenshot_and_errors_map_to_mcp_results():
    """The SDK glue: images become ImageContent after the text; errors carry no structured data."""
    from bridgecli.mcp.server import _tool_result
    from bridgecli.mcp.tools import ToolResult

    result = _tool_result(ToolResult("shot", {"tab": 1}, images=(("iVBORw0KGgo=", "image/png"),)))
    assert [type(b) for b in result.content] == [types.TextContent, types.ImageContent]
    assert result.content[1].data == "iVBORw0KGgo=" and result.structured_content == {"tab": 1}
    error = _tool_result(ToolResult.error('group "g" is owned by another client — use another group name'))
    assert error.is_error and error.structured_content is None and json.dumps(error.content[0].text)


def test_every_browser_tool_and_schema_is_documented():
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
    for tool in browser_tools.tools(BrowserSeat(port=1)):
        section = re.search(rf"### `{tool.name}` — [^\n]*\n\n(.*?)\n\n```json\n(.*?)\n```", text, re.S)
        assert section, f"{tool.name} is not documented in docs/mcp.md"
        assert section.group(1) == tool.description, f"{tool.name}: description differs from the code"
        assert json.loads(section.group(2)) == tool.input_schema, f"{tool.name}: schema differs from the code"


def test_default_serves_both_tool_sets_and_no_browser_keeps_out_of_the_election(gw_host, label):
    """With a gateway: by default messaging and browser tools side by side (and the session
    hosts the broker on its port); --no-browser wins over the env switch and binds nothing."""
    from tests.mcp.conftest import mcp_client
    from tests.mcp.test_messaging import TOOLS as MESSAGING_TOOLS

    port = free_port()
    browser_on = {"BRIDGE_MCP_BROWSER": "1", "BRIDGE_BROWSER_PORT": str(port)}

    async def scenario() -> None:
        async with mcp_client(gw_host, label, env=browser_on) as (session, _):
            assert {t.name for t in (await session.list_tools()).tools} == MESSAGING_TOOLS | BROWSER_TOOLS
            assert await until("the session to host", lambda: _is(mode_of(session), "host"))
            assert listening(port)
            assert not (await call(session, "bridge_roster")).is_error
        other = free_port()
        async with mcp_client(
            gw_host, label + "x", "--no-browser", env=dict(browser_on, BRIDGE_BROWSER_PORT=str(other))
        ) as (session, _):
            assert {t.name for t in (await session.list_tools()).tools} == MESSAGING_TOOLS
            assert not (await call(session, "bridge_roster")).is_error  # served, and still not bound:
            assert not listening(other)

    anyio.run(scenario)


def test_broker_refusals_come_back_as_tool_errors(host_bridge):
    """Against a real broker (hosted in-process) and two fake browsers with one label: the
    ambiguous and unknown targets and another agent's group are the broker's own words."""
    from tests.browser.fake_executor import FakeExecutor

    host = host_bridge(token="test-token", label="other-agent")
    assert host.mode == "host"
    browsers = [FakeExecutor(host.port, "test-token", id=f"id-{n}", label="twin").start() for n in (1, 2)]
    seat = BrowserSeat(port=host.port, token="test-token", label="mcp-test")
    registry = ToolRegistry()
    for tool in browser_tools.tools(seat):
        registry.add(tool)

    async def scenario() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(seat.run)
            result = await registry.call("browser_open", {"group": "g", "url": "http://x/", "target": "twin"})
            assert result.is_error and result.text == (
                "target 'twin' matches several browsers: id-1, id-2 — pass one of these ids instead"
            )
            result = await registry.call("browser_open", {"group": "g", "url": "http://x/", "target": "nope"})
            assert result.is_error and "no connected browser has id or label 'nope'" in result.text
            await anyio.to_thread.run_sync(lambda: host.send("open", "theirs", {"url": "http://x/"}))
            result = await registry.call("browser_click", {"group": "theirs", "selector": "#go"})
            assert (
                result.text
                == (
                    'group "theirs" is owned by another client — use another group name, or '
                    "wait until the owning agent exits"
                )
                and result.is_error
            )
            result = await registry.call("browser_open", {"group": "g", "url": "http://x/", "target": "id-2"})
            assert not result.is_error and result.data["tab"]
            assert seat.mode() == "guest"
            group.cancel_scope.cancel()

    try:
        anyio.run(scenario)
    finally:
        seat.close()
        for browser in browsers:
            browser.stop()


def test_re_electing_comes_back_as_the_brokers_tool_error(bridge_home):
    """A real `bridge mcp` guest whose host went away while the port stays taken (by a
    listening socket that never answers) stays re-electing: every browser call is a one-line
    tool error with the bridge's re-electing message, until the port frees and it hosts."""
    from bridgecli.browser.broker import Broker
    from bridgecli.browser.connect import RE_ELECTING_MESSAGE
    from bridgecli.browser.server import BrokerServer, bind_loopback

    port = free_port()
    sock = bind_loopback(port)
    squatter = sock.dup()  # the same listening socket, kept open when the broker closes its fd
    token_file.write(port, "test-token")
    server = BrokerServer(Broker(), "test-token", sock).start()
    expected = f"{RE_ELECTING_MESSAGE} — retry in a moment"

    async def scenario() -> None:
        async with browser_mcp(browser_env(bridge_home, port), "guest", bridge_home.root / "guest.log") as session:
            assert await until("the session to join as a guest", lambda: _is(mode_of(session), "guest"))
            # the host goes away: its connections close, but nobody can win the port
            await anyio.to_thread.run_sync(server.shutdown)

            async def refused() -> Any:
                result = await call(session, "browser_open", group="g", url="http://127.0.0.1:9/")
                return result if result.is_error and "re-electing" in text_of(result) else None

            result = await until("the guest to report re-electing", refused)
            assert text_of(result) == expected and result.structured_content is None
            for tool, args in (
                ("browser_targets", {}),
                ("browser_tabs", {}),
                ("browser_release", {"group": "g"}),
                ("browser_text", {"group": "g"}),
            ):
                result = await call(session, tool, **args)
                assert result.is_error and text_of(result) == expected, (tool, text_of(result))
            # the port frees: the guest wins it and hosts; calls work again
            squatter.close()
            assert await until("the guest to host", lambda: _is(mode_of(session), "host"))
            assert (await ok(session, "browser_targets")).structured_content["targets"] == []

    try:
        anyio.run(scenario)
    finally:
        squatter.close()
        server.shutdown()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signalled_host_leaves_cleanly(bridge_home, sig):
    """MCP clients stop their servers with SIGTERM: the browser host shuts its broker down and
    drops its pid from bridge.json (keeping the token), and the process exits 0."""
    port = free_port()
    proc = subprocess.Popen(
        [BRIDGE_BIN, "mcp", "--label", "leaver"],
        env=browser_env(bridge_home, port),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not ((data := _token_data()) and data.get("pid") == proc.pid and listening(port)):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the session never hosted the broker"
            time.sleep(0.1)
        token = data["token"]
        proc.send_signal(sig)
        assert proc.wait(20) == 0, proc.stderr.read().decode() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    after = _token_data()
    assert after is not None and "pid" not in after and after["token"] == token
    assert not listening(port)


def _token_data() -> dict | None:
    try:
        return token_file.read()
    except Exception:
        return None
