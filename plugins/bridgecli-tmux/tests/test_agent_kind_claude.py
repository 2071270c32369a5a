"""A real Claude Code spawned from a profile that says only ``agent = "claude-code"``.

The gateway starts it in a tmux pane, waits for the built-in readiness check (its real input
line), and only then answers the spawn; a message sent the moment ``bridge spawn`` returns
shows up in that TUI exactly once, and ``--prompt`` arrives as its first prompt. Claude Code
runs offline with a made-up key (tests/support/agent_clis.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tmux_helpers import agent_tmux_server, spawn_with_prompt_then_send, wait_for

from tests.support import agent_clis
from tests.support.tmux import stop_server

pytestmark = pytest.mark.slow


@pytest.fixture
def claude_host(host_factory, short_tmp: Path):
    """Host b with a tmux server whose programs see Claude Code's offline environment, and a
    profile that starts it in a HOME where it opens straight on its prompt; yields (host,
    tmux, the PATH with Claude Code on it)."""
    bin_dir = agent_clis.install("claude")
    b = host_factory("b", extra_env={"BRIDGE_ROSTER_INTERVAL": "0.5"})
    home, project = b.root / "agent-home", b.root / "project"
    project.mkdir(parents=True)
    agent_clis.claude_home(home, project)
    sock = str(short_tmp / "s")
    tmux, env, pid = agent_tmux_server(b, sock, agent_clis.client_env(home, bin_dir))
    b.write_config(f"""
[plugins.tmux]
socket = "{sock}"

[profiles.claude]
agent = "claude-code"
cwd = "{project}"
env = {{ HOME = "{home}" }}
""")
    yield b, tmux, env["PATH"]
    stop_server(sock, pid)


def test_spawned_claude_is_ready_and_gets_a_message_once(host_factory, claude_host) -> None:
    b, tmux, path = claude_host
    a = host_factory("a", extra_env={"BRIDGE_ROSTER_INTERVAL": "0.5"})
    a.register("main", role="main")
    b.start_gateway(env={"PATH": path}), a.start_gateway()
    pane, marker, first, word = spawn_with_prompt_then_send(a, b, "claude", "cc1", spawn_timeout=180)

    wait_for(lambda: marker in tmux.capture(pane, 300), timeout=60, what="the message in Claude Code's pane")
    wait_for(lambda: first in tmux.capture(pane, 300), timeout=60, what="the first prompt in Claude Code's pane")
    screen = tmux.capture(pane, 300)
    assert "Do you want to use this API key?" not in screen
    # the header is typed as keys and stays visible; Claude Code may fold the pasted body away
    assert screen.count(marker) == 1 and screen.count(word) <= 1, screen
    assert screen.count(first) == 1, screen
    assert b.log().count("delivery failed") == 0, b.log()
    a.bridge("stop", "cc1", check=True)
