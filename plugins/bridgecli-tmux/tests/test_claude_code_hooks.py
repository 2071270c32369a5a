"""The hooks `bridge install claude-code` writes, run by the real Claude Code TUI in tmux.

Two simulated hosts on the session's real RabbitMQ, real gateways. On b, `bridge install
claude-code` runs with an isolated HOME, then the real ``claude`` (npm,
tests/support/agent_clis.py) starts offline in a hand-registered pane (no ``BRIDGE_GID``: the
hook finds its entity by ``$TMUX_PANE``). A message from a is typed into it; Claude Code
submits it, runs ``bridge hook claude-code prompt``, and the sender on a learns it was read;
its model call fails (no network), which ends the turn, and the roster shows it idle.
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
def claude_with_hooks(host_factory, short_tmp: Path):
    """Host b whose tmux pane runs the real ``claude`` with bridge's hooks installed by
    `bridge install claude-code`. Yields ``(b, tmux, pane, home)``."""
    bin_dir = agent_clis.install("claude")
    b = host_factory("b", extra_env={"BRIDGE_ROSTER_INTERVAL": "0.5"})
    sock = str(short_tmp / "s")
    b.write_config(f'[plugins.tmux]\nsocket = "{sock}"\n')
    home, project = short_tmp / "home", short_tmp / "project"
    project.mkdir()
    agent_clis.claude_home(home, project)
    env = {k: v for k, v in b.env.items() if not k.startswith("TMUX") and k != "BRIDGE_GID"}
    env.update(agent_clis.client_env(home, bin_dir))
    env["CLAUDE_CODE_MAX_RETRIES"] = "0"  # offline, the turn ends at once rather than after minutes
    installed = subprocess.run(
        [BRIDGE_BIN, "install", "claude-code"], env=env, capture_output=True, text=True, timeout=60
    )
    assert installed.returncode == 0, installed.stderr
    subprocess.run(
        ["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "w", "-x", "200", "-y", "50"]
        + ["-c", str(project), str(bin_dir / "claude")],
        check=True,
        env=env,
    )
    tmux = Tmux(sock)
    pane = tmux.pane("w:").pane_id
    pid = server_pid(sock)
    try:
        wait_for(lambda: "for shortcuts" in tmux.capture(pane), timeout=90, what="Claude Code's prompt")
        yield b, tmux, pane, home
    finally:
        stop_server(sock, pid)


def test_the_prompt_hook_tells_the_sender_its_message_was_read(host_factory, claude_with_hooks) -> None:
    b, tmux, pane, home = claude_with_hooks
    hooks = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    assert {h["command"] for g in hooks["UserPromptSubmit"] for h in g["hooks"]} == {
        f"{Path(BRIDGE_BIN).absolute()} hook claude-code prompt"
    }
    a = host_factory("a")
    a.register("main", role="main")
    worker = b.register("claude", deliver=f"tmux:{pane}")
    a.start_gateway(), b.start_gateway()
    word = f"hello-{uuid.uuid4().hex[:8]}"

    msg_id = a.bridge_json("send", worker, word, "--from", "main")["msgId"]
    wait_for(lambda: f"[bridge {msg_id[:8]}]" in tmux.capture(pane, 200), timeout=60, what="the frame in the pane")

    # the sender's host learns the message was read, and from which hook
    record = a.bridge_json("track", msg_id, "--wait", "read", "--timeout", "90s", timeout=120)
    assert record["states"]["read"]["how"] == "hook:claude-code", record
    assert "delivered" in record["states"], record

    # the turn ended on the API error (StopFailure): the roster shows the agent idle again
    def status() -> str:
        return next(e["status"] for e in b.bridge_json("roster")["entries"] if e["gid"] == worker)

    wait_for(lambda: status() == "idle", timeout=60, what="the agent idle in the roster")

    # the hook printed nothing and failed nowhere: Claude Code records a hook's output (which
    # a prompt hook would add to the model's context) and its errors in the transcript
    def transcript() -> list[dict]:
        entries = []
        for path in (home / ".claude" / "projects").rglob("*.jsonl"):
            for line in path.read_text().splitlines():
                try:
                    entries.append(json.loads(line))
                except ValueError:
                    pass  # a line being written
        return entries

    wait_for(lambda: word in json.dumps(transcript()), timeout=30, what="the prompt in Claude Code's transcript")
    ours = [
        e["attachment"]
        for e in transcript()
        if e.get("type") == "attachment" and " hook claude-code " in str(e["attachment"].get("command"))
    ]
    assert all(a.get("stdout", "") == "" and not a.get("content") and a.get("exitCode", 0) == 0 for a in ours), ours
    assert not [a for a in ours if "error" in a.get("type", "")], ours
