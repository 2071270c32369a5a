"""Fixtures for driving the real ``bridge mcp`` with the MCP SDK's own stdio client.

:func:`mcp_client` starts ``bridge mcp`` as a subprocess of a simulated host (its XDG dirs,
host id and broker), performs the real handshake with ``ClientSession`` and records every
notification the server pushes, so tests can wait for them.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.extension import NotificationBinding  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from tests.support.env import BRIDGE_BIN  # noqa: E402
from tests.support.hosts import Host, close_checked  # noqa: E402

#: messaging tests keep `bridge mcp` out of the browser-broker election (its default port is
#: shared machine-wide); tests/mcp/test_browser_tools.py turns it on with a private port
MESSAGING_ONLY = {"BRIDGE_MCP_BROWSER": "0"}


class ChannelParams(BaseModel):
    content: str
    meta: dict[str, str] = {}


@dataclass
class Pushed:
    """Notifications the server sent: Claude channel events and log messages."""

    channel: list[ChannelParams] = field(default_factory=list)
    logs: list[Any] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    #: transport-level faults, e.g. a line on stdout that is not JSON-RPC (must stay empty)
    faults: list[Exception] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)
    #: the server's instructions from the handshake (they name the session's label)
    instructions: str = ""

    def _poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_until(self, predicate: Any, timeout: float = 45) -> Any:
        """Wait until ``predicate()`` is truthy as notifications come in (fails after ``timeout``)."""
        with anyio.fail_after(timeout):
            while not (value := predicate()):
                await self.changed.wait()
            return value

    async def wait_channel(self, kind: str, count: int = 1, timeout: float = 45) -> list[ChannelParams]:
        """Wait until ``count`` channel events of ``kind`` arrived (fails after ``timeout``)."""

        def found() -> list[ChannelParams] | None:
            events = [c for c in self.channel if c.meta.get("kind") == kind]
            return events if len(events) >= count else None

        return await self.wait_until(found, timeout)


@asynccontextmanager
async def mcp_client(
    host: Host,
    label: str | None,
    *args: str,
    env: dict[str, str] | None = None,
    errlog: Path | None = None,
    cwd: Path | None = None,
) -> AsyncIterator[tuple[ClientSession, Pushed]]:
    """An initialized SDK client session with a real ``bridge mcp --label LABEL`` of ``host``
    (label None: no ``--label``, the label comes from ``cwd``)."""
    pushed = Pushed()

    async def on_channel(params: ChannelParams) -> None:
        pushed.channel.append(params)
        pushed._poke()

    async def on_log(params: Any) -> None:
        pushed.logs.append(params)
        pushed._poke()

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            pushed.faults.append(message)
            return
        root = getattr(message, "root", message)
        if getattr(root, "method", "") == "notifications/resources/updated":
            pushed.updated.append(str(root.params.uri))
            pushed._poke()

    server = StdioServerParameters(
        command=BRIDGE_BIN,
        args=["mcp", *(["--label", label] if label else []), *args],
        env={**MESSAGING_ONLY, **host.env, **(env or {})},
        cwd=cwd,
    )
    log_path = errlog or (host.root / f"mcp-{label or 'cwd'}.log")
    with open(log_path, "a") as log:
        async with stdio_client(server, errlog=log) as (read, write):
            async with ClientSession(
                read,
                write,
                logging_callback=on_log,
                message_handler=on_message,
                notification_bindings=[
                    NotificationBinding(
                        method="notifications/claude/channel", params_type=ChannelParams, handler=on_channel
                    )
                ],
            ) as session:
                pushed.instructions = (await session.initialize()).instructions or ""
                yield session, pushed
                assert pushed.faults == [], f"bridge mcp wrote something that is not protocol: {pushed.faults}"


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


@pytest.fixture(scope="module")
def gw_host(rabbitmq) -> Iterator[Host]:
    """One host with a running gateway, shared by a module's tests (labels keep them apart)."""
    root = Path(tempfile.mkdtemp(prefix="hmcp", dir="/tmp"))
    host = Host(f"mcp-{uuid.uuid4().hex[:6]}", root, rabbitmq.uri, extra_env=MESSAGING_ONLY)
    host.start_gateway(timeout=90)
    yield host
    try:
        close_checked([host])
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def label() -> str:
    """A label unique to the test (hosts are shared within a module)."""
    return f"m{uuid.uuid4().hex[:6]}"
