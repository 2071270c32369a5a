"""A long multi-line message typed into the real Claude Code TUI in a tmux pane.

Two simulated hosts on the session's real RabbitMQ, real gateways; on b the real ``claude``
(npm, tests/support/agent_clis.py) runs offline in a hand-registered pane, with a
``UserPromptSubmit`` hook that logs every prompt it submits. Its model call fails (no
network): the API error it shows is expected.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from tmux_helpers import wait_for

from bridgecli_tmux.client import Tmux, tmux_available
from tests.support import agent_clis
from tests.support.tmux import server_pid, stop_server

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")]

#: the hook: append the JSON Claude Code hands it (``prompt`` and all) to the file in argv[1]
PROMPT_HOOK = "import sys\nwith open(sys.argv[1], 'a') as log:\n    log.write(sys.stdin.read().strip() + '\\n')\n"


def _prompts(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(line)["prompt"] for line in lines]


@pytest.fixture
def claude_pane(host_factory, short_tmp: Path):
    """Host b whose tmux pane runs the real ``claude`` at its prompt (own HOME, own socket,
    no ``BRIDGE_GID``). Yields ``(b, tmux, pane, home, prompt log)``."""
    bin_dir = agent_clis.install("claude")
    b = host_factory("b")
    sock = str(short_tmp / "s")
    b.write_config(f'[plugins.tmux]\nsocket = "{sock}"\n')
    home, project, log = short_tmp / "home", short_tmp / "project", short_tmp / "prompts.jsonl"
    project.mkdir()
    agent_clis.claude_home(home, project)
    (short_tmp / "hook.py").write_text(PROMPT_HOOK)
    hook = f"{shlex.quote(sys.executable)} {short_tmp / 'hook.py'} {log}"
    settings = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": hook}]}]}}
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    env = {k: v for k, v in b.env.items() if not k.startswith("TMUX") and k != "BRIDGE_GID"}
    env.update(agent_clis.client_env(home, bin_dir))
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
        assert "Do you want to use this API key?" not in tmux.capture(pane, 200)
        yield b, tmux, pane, home, log
    finally:
        stop_server(sock, pid)


def test_long_message_reaches_claude_code_once_and_whole(host_factory, claude_pane) -> None:
    b, tmux, pane, home, log = claude_pane
    a = host_factory("a")
    main = a.register("main", role="main")
    worker = b.register("claude", deliver=f"tmux:{pane}")
    a.start_gateway(), b.start_gateway()
    tag = uuid.uuid4().hex[:12]
    lines = [f"FIRST-{tag} please read all forty lines"]
    lines += [f"line {n:02d}: " + "the quick brown fox jumps over the lazy dog " * 2 for n in range(1, 39)]
    lines.append(f"LAST-{tag} end of the message")
    content = "\n".join(lines)
    assert len(content.encode()) > 3000

    msg_id = a.bridge_json("send", worker, content, "--from", "main")["msgId"]
    wait_for(lambda: _prompts(log), timeout=60, what="the UserPromptSubmit hook")
    wait_for(lambda: "API" in tmux.capture(pane).split(f"LAST-{tag}")[-1], timeout=60, what="the API error")

    # Claude Code received all of it, header and body, in one submission
    assert b.bridge_json("show", msg_id)["content"] == content
    [prompt] = _prompts(log)
    header = f"[bridge {msg_id[:8]}] SEND from main (gid {main}) on {a.name} · msg {msg_id}"
    assert prompt == "\n".join(
        [header, f'answer with: bridge reply {msg_id} "..."', *(f"│ {line}" for line in lines)]
        + [f"[end bridge {msg_id[:8]}]"]
    )
    # its input box held the header as typed and the body folded once (its own history)
    history = home / ".claude" / "history.jsonl"  # written a moment after the hook ran
    wait_for(lambda: history.exists() and history.read_text().strip(), timeout=30, what="Claude Code's history")
    [entry] = [json.loads(line) for line in history.read_text().splitlines()]
    assert entry["display"].startswith(header) and entry["display"].count("[Pasted text #") == 1
    assert len(entry["pastedContents"]) == 1

    screen = tmux.run("capture-pane", "-p", "-J", "-S", "-", "-t", pane)  # the whole scrollback
    assert screen.count(f"[bridge {msg_id[:8]}]") == 1
    assert screen.count(f"FIRST-{tag}") == 1 and screen.count(f"LAST-{tag}") == 1

    # the gateway delivered it once and holds nothing back; nothing was dead-lettered
    assert sum("delivered" in line and msg_id in line for line in b.whole_log().splitlines()) == 1
    [row] = [e for e in b.bridge_json("status")["entities"] if e["gid"] == worker]
    assert (row["held"], row["ready"]) == (0, 0)
    dead = b.bridge_json("dlq", "list", "--limit", "10000")["dead_letters"]
    assert not [d for d in dead if d["id"] == msg_id]

    # a shell on b without BRIDGE_GID or --from answers as the pane's entity
    b.bridge("reply", msg_id, f"done {tag}", check=True)
    back = a.bridge_json("poll", "--as", main, "--wait", "30s")["messages"]
    assert [(m["kind"], m["content"], m["from"], m["fromLabel"], m["inReplyTo"]) for m in back] == [
        ("REPLY", f"done {tag}", worker, "claude", msg_id)
    ]
