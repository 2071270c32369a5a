"""A real OpenCode, and a real Gemini CLI, spawned from a profile that says only its ``agent``.

The gateway starts each in a tmux pane with a first prompt, waits for the kind's readiness
check and only then answers the spawn; a message sent the moment ``bridge spawn`` returns shows
up in that TUI exactly once. OpenCode submits a ``--prompt`` from its home view and then
switches to its session view, dropping keys typed meanwhile: its kind waits for the session.
Both run offline with a made-up key and their first-run state written beforehand
(tests/support/agent_clis.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tmux_helpers import agent_tmux_server, spawn_with_prompt_then_send, wait_for

from tests.support import agent_clis
from tests.support.tmux import stop_server

pytestmark = pytest.mark.slow

#: kind -> (its program, what its screen shows once the first prompt was submitted)
KINDS = {"opencode": ("opencode", "\u25a3 "), "gemini": ("gemini", "> first-")}


@pytest.fixture(params=sorted(KINDS))
def agent_host(request, host_factory, short_tmp: Path):
    """Host b with a tmux server whose programs see the CLIs' offline environment, and a
    profile ``agent`` of the kind under test in a HOME where it opens on its prompt; yields
    (kind, host, tmux, the PATH with the CLI on it)."""
    kind = request.param
    bin_dir = agent_clis.install(KINDS[kind][0])
    b = host_factory("b", extra_env={"BRIDGE_ROSTER_INTERVAL": "0.5"})
    home, project = b.root / "agent-home", b.root / "project"
    project.mkdir(parents=True)
    home.mkdir()
    if kind == "gemini":
        agent_clis.gemini_home(home, project)
    sock = str(short_tmp / "s")
    tmux, env, pid = agent_tmux_server(b, sock, agent_clis.client_env(home, bin_dir))
    # a loaded machine may take seconds to draw typed keys; a lost key never shows at all, so
    # a longer confirm_timeout still catches one while a slow redraw is not a failed delivery
    b.write_config(f"""
[plugins.tmux]
socket = "{sock}"
confirm_timeout = 15

[profiles.agent]
agent = "{kind}"
cwd = "{project}"
env = {{ HOME = "{home}" }}
""")
    yield kind, b, tmux, env["PATH"]
    stop_server(sock, pid)


def test_spawned_agent_with_a_prompt_gets_a_message_once(host_factory, agent_host) -> None:
    kind, b, tmux, path = agent_host
    a = host_factory("a", extra_env={"BRIDGE_ROSTER_INTERVAL": "0.5"})
    a.register("main", role="main")
    b.start_gateway(env={"PATH": path}), a.start_gateway()
    pane, marker, first, _ = spawn_with_prompt_then_send(a, b, "agent", "ag1", spawn_timeout=120)

    try:
        wait_for(lambda: marker in tmux.capture(pane, 300), timeout=30, what=f"the message in {kind}'s pane")
        wait_for(lambda: KINDS[kind][1] in tmux.capture(pane, 300), timeout=30, what=f"{kind} taking its prompt")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{tmux.capture(pane, 300)}\n{b.log()}") from None
    screen = tmux.capture(pane, 300)
    assert screen.count(marker) == 1 and screen.count(first) == 1, screen
    assert b.log().count("delivery failed") == 0, b.log()
    a.bridge("stop", "ag1", check=True)
