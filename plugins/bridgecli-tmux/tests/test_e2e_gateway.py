"""U1 end to end through the real gateway: a main holds, a worker lives in a tmux pane.

Two simulated hosts on the session's real RabbitMQ (root conftest's ``host_factory``). The
worker's gateway types the framed message into the pane; a ``bridge reply`` typed *in that
pane* — the command the frame tells the agent to use — reaches the main's hold.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bridgecli_tmux.client import Tmux, tmux_available
from tmux_helpers import wait_for

pytestmark = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")


@pytest.fixture
def worker_pane(host_factory, short_tmp: Path):
    """Host b with a private tmux server whose shell has b's environment (as an agent
    started on b would); yields (host, tmux, pane id)."""
    b = host_factory("b")
    sock = str(short_tmp / "s")
    b.write_config(f'[plugins.tmux]\nsocket = "{sock}"\n')
    env = {k: v for k, v in b.env.items() if not k.startswith("TMUX")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    subprocess.run(["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "w", "-x", "220", "-y", "50",
                    "env PS1='worker$ ' bash --norc --noprofile"], check=True, env=env)
    tmux = Tmux(sock)
    pane = tmux.pane("w:").pane_id
    wait_for(lambda: "worker$" in tmux.capture(pane), what="the worker's prompt")
    yield b, tmux, pane
    subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)


def _poll(host, gid: str, wait: str = "10s") -> list[dict]:
    return host.bridge_json("poll", "--as", gid, "--wait", wait)["messages"]


def test_u1_framed_message_in_a_tmux_pane_and_reply_typed_there(host_factory, worker_pane) -> None:
    b, tmux, pane = worker_pane
    a = host_factory("a")
    main = a.register("main", role="main")
    worker = b.register("worker", deliver=f"tmux:{pane}")
    a.start_gateway(), b.start_gateway()

    sent = a.bridge_json("send", worker, "please review PR 7\nthen say LGTM", "--from", "main")
    marker = f"[bridge {sent['msgId'][:8]}]"
    wait_for(lambda: f"[end bridge {sent['msgId'][:8]}]" in tmux.capture(pane, 200), timeout=30,
             what="the framed message in the pane")
    screen = tmux.capture(pane, 200)
    assert f"# {marker} SEND from main (gid {main}) on {a.name}" in screen
    assert "# │ please review PR 7" in screen and "# │ then say LGTM" in screen
    command = re.search(r'answer with: (bridge reply \S+) "\.\.\."', screen)
    assert command and command.group(1) == f"bridge reply {sent['msgId']}"

    # the "agent" in the pane answers with exactly that command
    tmux.run("send-keys", "-t", pane, "-l", f'BRIDGE_GID={worker} {command.group(1)} "LGTM"')
    tmux.run("send-keys", "-t", pane, "Enter")
    back = _poll(a, main, "30s")
    assert [(m["kind"], m["content"], m["inReplyTo"], m["from"]) for m in back] == \
        [("REPLY", "LGTM", sent["msgId"], worker)]


def test_closed_pane_dead_letters_at_once(host_factory, worker_pane) -> None:
    b, tmux, pane = worker_pane
    a = host_factory("a")
    a.register("main", role="main")
    worker = b.register("worker", deliver=f"tmux:{pane}")
    a.start_gateway(), b.start_gateway()
    tmux.run("new-window", "-d", "-t", "w:")  # keep the server alive without the worker's pane
    tmux.run("kill-pane", "-t", pane)
    sent = a.bridge_json("send", worker, "anyone there?", "--from", "main")

    def dead_letter() -> dict | None:
        rows = b.bridge_json("dlq", "list")["dead_letters"]
        return next((r for r in rows if sent["msgId"] in json.dumps(r)), None)

    wait_for(dead_letter, timeout=30, what="the message in bridge.dlq")
    text = json.dumps(dead_letter())
    assert "delivery_failed" in text and f"tmux pane {pane} is gone" in text

    def roster_status() -> str | None:
        entries = b.bridge_json("roster", "--host", b.name)["entries"]
        return next((e["status"] for e in entries if e["gid"] == worker), None)

    wait_for(lambda: roster_status() == "gone", timeout=30, what="the roster to mark the worker gone")
