"""The hooks `bridge install codex` writes, run by the real Codex CLI in a tmux pane.

Two simulated hosts, real RabbitMQ and gateways. On b, `bridge install codex` writes
``$CODEX_HOME/hooks.json`` in an isolated HOME, and a shell pane is the entity (found by
``$TMUX_PANE``). A message from a is typed there, then ``codex exec`` (npm) runs in that pane
with the frame's header as its prompt: its ``UserPromptSubmit`` hook runs ``bridge hook codex
prompt`` and the sender learns the message was read. ``--dangerously-bypass-hook-trust``
stands for the user's one-time trust in ``/hooks``; the model call fails offline.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from tmux_helpers import wait_for

from bridgecli_tmux.client import Tmux
from tests.support import agent_clis
from tests.support.env import BRIDGE_BIN
from tests.support.tmux import server_pid, stop_server

pytestmark = pytest.mark.slow  # tmux is a test dependency: without it these fail, never skip


@pytest.fixture
def codex_pane(host_factory, short_tmp: Path):
    """Host b with a shell pane whose environment runs the real ``codex`` offline, bridge's
    hooks installed by `bridge install codex`. Yields ``(b, tmux, pane, codex home, project)``."""
    bin_dir = agent_clis.install("codex")
    b = host_factory("b")
    sock = str(short_tmp / "s")
    b.write_config(f'[plugins.tmux]\nsocket = "{sock}"\n')
    home, project = short_tmp / "home", short_tmp / "project"
    project.mkdir()
    home.mkdir()
    env = {k: v for k, v in b.env.items() if not k.startswith("TMUX") and k != "BRIDGE_GID"}
    env.update(agent_clis.client_env(home, bin_dir))
    env["CODEX_HOME"] = str(home / ".codex")
    env["PATH"] = f"{Path(BRIDGE_BIN).parent}:{env['PATH']}"
    installed = subprocess.run([BRIDGE_BIN, "install", "codex"], env=env, capture_output=True, text=True, timeout=60)
    assert installed.returncode == 0, installed.stderr
    assert "trust" in installed.stderr  # the user is told Codex waits for the hooks' trust
    subprocess.run(
        ["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "w", "-x", "220", "-y", "50"]
        + ["-c", str(project), "env PS1='worker$ ' bash --norc --noprofile"],
        check=True,
        env=env,
    )
    tmux = Tmux(sock)
    pane = tmux.pane("w:").pane_id
    pid = server_pid(sock)
    try:
        wait_for(lambda: "worker$" in tmux.capture(pane), what="the shell's prompt")
        yield b, tmux, pane, home / ".codex", project
    finally:
        stop_server(sock, pid)


def test_codex_prompt_hook_tells_the_sender_its_message_was_read(host_factory, codex_pane) -> None:
    b, tmux, pane, codex_home, project = codex_pane
    hooks = json.loads((codex_home / "hooks.json").read_text())["hooks"]
    assert {h["command"] for g in hooks["UserPromptSubmit"] for h in g["hooks"]} == {
        f"{Path(BRIDGE_BIN).absolute()} hook codex prompt"
    }
    a = host_factory("a")
    a.register("main", role="main")
    worker = b.register("worker", deliver=f"tmux:{pane}")
    a.start_gateway(), b.start_gateway()

    msg_id = a.bridge_json("send", worker, "please read me", "--from", "main")["msgId"]
    marker = f"[bridge {msg_id[:8]}]"
    end = f"[end bridge {msg_id[:8]}]"

    def typed() -> bool:  # the whole frame, its Enter included: typing sooner joins its last line
        text = tmux.capture(pane, 200).rstrip()
        return end in text and not text.endswith(end)

    wait_for(typed, timeout=60, what="the whole frame in the pane")

    prompt = f"{marker} SEND from main · msg {msg_id}\n│ please read me"
    command = f"codex exec --skip-git-repo-check --dangerously-bypass-hook-trust {shlex.quote(prompt)}"
    tmux.run("send-keys", "-t", pane, "-l", command)
    tmux.run("send-keys", "-t", pane, "Enter")
    try:
        done = a.bridge("track", msg_id, "--wait", "read", "--timeout", "90s", "--json", timeout=120)
        assert done.returncode == 0, f"{done.stdout}{done.stderr}\n{tmux.capture(pane, 200)}"
        record = json.loads(done.stdout)
        assert record["states"]["read"]["how"] == "hook:codex", record
    finally:
        tmux.run("send-keys", "-t", pane, "C-c")
