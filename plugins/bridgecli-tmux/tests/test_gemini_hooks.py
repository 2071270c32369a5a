"""The hooks `bridge install gemini` writes, run by the real Gemini CLI TUI in tmux.

As test_claude_code_hooks.py does for Claude Code: two simulated hosts on the session's real
RabbitMQ, real gateways; on b, `bridge install gemini` in an isolated HOME, then the real
``gemini`` (npm, tests/support/agent_clis.py) offline in a hand-registered pane. Its
``BeforeAgent`` hook runs ``bridge hook gemini prompt`` when a typed message is submitted, and
the sender on a learns it was read. Its model call fails (no network), as expected.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from tmux_helpers import wait_for

from bridgecli_tmux.client import Tmux
from tests.support import agent_clis
from tests.support.env import BRIDGE_BIN
from tests.support.tmux import server_pid, stop_server

pytestmark = pytest.mark.slow  # tmux is a test dependency: without it these fail, never skip


@pytest.fixture
def gemini_with_hooks(host_factory, short_tmp: Path):
    """Host b whose tmux pane runs the real ``gemini`` with bridge's hooks installed by
    `bridge install gemini`. Yields ``(b, tmux, pane, home)``."""
    bin_dir = agent_clis.install("gemini")
    b = host_factory("b")
    sock = str(short_tmp / "s")
    b.write_config(f'[plugins.tmux]\nsocket = "{sock}"\nconfirm_timeout = 15\n')
    home, project = short_tmp / "home", short_tmp / "project"
    project.mkdir()
    home.mkdir()
    agent_clis.gemini_home(home, project)
    # not CI's variables: Gemini CLI run under CI=true is non-interactive and exits at once
    env = {
        k: v
        for k, v in b.env.items()
        if not k.startswith(("TMUX", "CI_")) and k not in ("BRIDGE_GID", "CI", "CONTINUOUS_INTEGRATION")
    }
    env.update(agent_clis.client_env(home, bin_dir))
    installed = subprocess.run([BRIDGE_BIN, "install", "gemini"], env=env, capture_output=True, text=True, timeout=60)
    assert installed.returncode == 0, installed.stderr
    subprocess.run(
        ["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "w", "-x", "200", "-y", "50"]
        + ["-c", str(project), str(bin_dir / "gemini")],
        check=True,
        env=env,
    )
    tmux = Tmux(sock)
    pane = tmux.pane("w:").pane_id
    pid = server_pid(sock)
    try:
        wait_for(lambda: "Type your message" in tmux.capture(pane), timeout=90, what="Gemini CLI's prompt")
        yield b, tmux, pane, home
    finally:
        stop_server(sock, pid)


def test_the_before_agent_hook_tells_the_sender_its_message_was_read(host_factory, gemini_with_hooks) -> None:
    b, tmux, pane, home = gemini_with_hooks
    settings = json.loads((home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"  # kept beside ours
    assert {h["command"] for g in settings["hooks"]["BeforeAgent"] for h in g["hooks"]} == {
        f"{Path(BRIDGE_BIN).absolute()} hook gemini prompt"
    }
    a = host_factory("a")
    a.register("main", role="main")
    worker = b.register("gemini", deliver=f"tmux:{pane}")
    a.start_gateway(), b.start_gateway()
    word = f"hello-{uuid.uuid4().hex[:8]}"

    msg_id = a.bridge_json("send", worker, word, "--from", "main")["msgId"]
    wait_for(lambda: f"[bridge {msg_id[:8]}]" in tmux.capture(pane, 200), timeout=60, what="the frame in the pane")
    # Gemini CLI 0.61 keeps the typed frame in its input box here (bridge's Enter does not
    # submit it: a matter of tmux delivery, not of hooks); submit it as its user would
    try:
        wait_for(lambda: "Type your message" in tmux.capture(pane, 200), timeout=5, what="the submit")
    except AssertionError:
        tmux.run("send-keys", "-t", pane, "Enter")
    done = a.bridge("track", msg_id, "--wait", "read", "--timeout", "90s", "--json", timeout=120)
    assert done.returncode == 0, f"{done.stdout}{done.stderr}\n{tmux.capture(pane, 200)}"
    record = json.loads(done.stdout)
    assert record["states"]["read"]["how"] == "hook:gemini", record
