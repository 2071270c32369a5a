"""U1 across two hosts from an MCP main to a worker in a tmux pane (the tmux plugin), and back.

Host a runs ``bridge mcp`` (the main); host b's gateway types the framed message into a pane
of a private tmux server; the "agent" there answers with the exact command the frame shows.
The main's ``bridge_send`` with ``wait`` returns that reply.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import mcp_client, text_of
from tests.support.tmux import server_pid, stop_server

tmux_client = pytest.importorskip("bridgecli_tmux.client")
pytestmark = pytest.mark.skipif(not tmux_client.tmux_available(), reason="tmux is not installed")

FAST = {"BRIDGE_ROSTER_INTERVAL": "0.5"}


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def worker_pane(host_factory):
    """Host b with a private tmux server whose shell has b's environment; yields
    (host, tmux, pane id)."""
    b = host_factory("b", extra_env=FAST)
    tmp = Path(tempfile.mkdtemp(prefix="tm", dir="/tmp"))
    sock = str(tmp / "s")
    b.write_config(f'[plugins.tmux]\nsocket = "{sock}"\n')
    env = {k: v for k, v in b.env.items() if not k.startswith("TMUX")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    subprocess.run(
        [
            "tmux",
            "-S",
            sock,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "w",
            "-x",
            "220",
            "-y",
            "50",
            "env PS1='worker$ ' bash --norc --noprofile",
        ],
        check=True,
        env=env,
    )
    tmux = tmux_client.Tmux(sock)
    pane = tmux.pane("w:").pane_id
    _wait_for(lambda: "worker$" in tmux.capture(pane), 10, "the worker's prompt")
    pid = server_pid(sock)
    yield b, tmux, pane
    stop_server(sock, pid)
    shutil.rmtree(tmp, ignore_errors=True)


def test_u1_mcp_main_to_tmux_worker_on_another_host(host_factory, worker_pane):
    b, tmux, pane = worker_pane
    a = host_factory("a", extra_env=FAST)
    worker = b.register("worker", deliver=f"tmux:{pane}")
    a.start_gateway(timeout=90), b.start_gateway(timeout=90)

    def agent_answers() -> None:
        """What the agent in the pane does: read the frame, run the answer command it shows."""

        def frame_entered() -> bool:
            # the frame's own Enter must have run first (a fresh prompt below its end line):
            # typed any sooner, the answer would join the frame's last comment line
            lines = tmux.capture(pane, 200).rstrip().splitlines()
            ends = [i for i, line in enumerate(lines) if "[end bridge" in line]
            return bool(ends) and lines[-1].strip() == "worker$" and ends[-1] < len(lines) - 1

        _wait_for(frame_entered, 30, "the framed message entered in the pane")
        command = re.search(r'answer with: (bridge reply \S+) "\.\.\."', tmux.capture(pane, 200))
        assert command, tmux.capture(pane, 200)
        tmux.run("send-keys", "-t", pane, "-l", f'BRIDGE_GID={worker} {command.group(1)} "LGTM from b"')
        tmux.run("send-keys", "-t", pane, "Enter")

    async def scenario():
        async with mcp_client(a, "main") as (session, _):
            deadline = time.monotonic() + 30  # the worker's label resolves through the roster
            while True:
                roster = (await session.call_tool("bridge_roster", {})).structured_content
                if any(e["label"] == "worker" for e in roster["entries"]) or time.monotonic() > deadline:
                    break
                await anyio.sleep(0.3)
            results = {}

            async def send():
                results["send"] = await session.call_tool(
                    "bridge_send", {"target": "worker", "content": "please review PR 7", "wait": 60}
                )

            async with anyio.create_task_group() as group:
                group.start_soon(send)
                await anyio.to_thread.run_sync(agent_answers)
            result = results["send"]
            assert not result.is_error, text_of(result)
            reply = result.structured_content["reply"]
            assert (reply["kind"], reply["content"], reply["from"], reply["fromHost"]) == (
                "REPLY",
                "LGTM from b",
                worker,
                b.name,
            )
            assert "please review PR 7" in tmux.capture(pane, 200)

    anyio.run(scenario)
