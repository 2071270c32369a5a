"""U1 end to end through the real gateway: a main holds, a worker lives in a tmux pane.

Two simulated hosts on the session's real RabbitMQ (root conftest's ``host_factory``). The
worker's gateway types the framed message into the pane; a ``bridge reply`` typed *in that
pane* — the command the frame tells the agent to use — reaches the main's hold.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from tmux_helpers import wait_for

from bridgecli_tmux.client import Tmux, tmux_available
from tests.support.tmux import server_pid, stop_server

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
    tmux = Tmux(sock)
    pane = tmux.pane("w:").pane_id
    wait_for(lambda: "worker$" in tmux.capture(pane), what="the worker's prompt")
    pid = server_pid(sock)
    yield b, tmux, pane
    stop_server(sock, pid)


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
    wait_for(
        lambda: f"[end bridge {sent['msgId'][:8]}]" in tmux.capture(pane, 200),
        timeout=30,
        what="the framed message in the pane",
    )
    screen = tmux.capture(pane, 200)
    assert f"# {marker} SEND from main (gid {main}) on {a.name}" in screen
    assert "# │ please review PR 7" in screen and "# │ then say LGTM" in screen
    command = re.search(r'answer with: (bridge reply \S+) "\.\.\."', screen)
    assert command and command.group(1) == f"bridge reply {sent['msgId']}"

    # the "agent" in the pane answers with exactly that command
    tmux.run("send-keys", "-t", pane, "-l", f'BRIDGE_GID={worker} {command.group(1)} "LGTM"')
    tmux.run("send-keys", "-t", pane, "Enter")
    back = _poll(a, main, "30s")
    assert [(m["kind"], m["content"], m["inReplyTo"], m["from"]) for m in back] == [
        ("REPLY", "LGTM", sent["msgId"], worker)
    ]


#: few attempts so a gone pane dead-letters within seconds; the worker's backoff between
#: attempts is fixed (0.5 s, 1 s, …) — messaging.max_attempts is the only retry setting
FAST_RETRIES = "[messaging]\nmax_attempts = 3\n"


def _dead_letters(host, ids) -> dict[str, dict]:
    """This test's rows of bridge.dlq (the queue is shared by every test on the broker)."""
    rows = host.bridge_json("dlq", "list", "--limit", "10000")["dead_letters"]
    return {row["id"]: row for row in rows if row["id"] in ids}


def test_closed_pane_is_retried_then_dead_lettered(host_factory, worker_pane) -> None:
    b, tmux, pane = worker_pane
    b.write_config(f'[plugins.tmux]\nsocket = "{tmux.socket}"\n{FAST_RETRIES}')
    a = host_factory("a")
    a.register("main", role="main")
    worker = b.register("worker", deliver=f"tmux:{pane}")
    a.start_gateway(), b.start_gateway()
    tmux.run("new-window", "-d", "-t", "w:")  # keep the server alive without the worker's pane
    tmux.run("kill-pane", "-t", pane)
    sent = a.bridge_json("send", worker, "anyone there?", "--from", "main")

    wait_for(lambda: _dead_letters(b, [sent["msgId"]]), timeout=30, what="the message in bridge.dlq")
    row = _dead_letters(b, [sent["msgId"]])[sent["msgId"]]
    assert row["reason"] == "delivery_failed" and f"tmux pane {pane} is gone" in row["detail"]
    assert int(row["attempts"]) == 3  # retried up to messaging.max_attempts, not dropped at once
    assert b.log().count("delivery failed") >= 3

    def roster_status() -> str | None:
        entries = b.bridge_json("roster", "--host", b.name)["entries"]
        return next((e["status"] for e in entries if e["gid"] == worker), None)

    wait_for(lambda: roster_status() == "gone", timeout=30, what="the roster to mark the worker gone")


def test_pane_killed_partway_through_a_stream(host_factory, worker_pane, short_tmp) -> None:
    """Several messages, the pane killed after some arrived: none is lost silently — each
    one either reached the pane (and was acked) or was retried and dead-lettered with a reason."""
    b, tmux, pane = worker_pane
    # enter_delay slows each delivery to > 0.3 s, so the kill lands mid-stream
    b.write_config(f'[plugins.tmux]\nsocket = "{tmux.socket}"\nenter_delay = 0.3\n{FAST_RETRIES}')
    output = short_tmp / "pane-output"
    tmux.run("pipe-pane", "-t", pane, "-o", f"cat >> {output}")  # everything the pane ever showed
    tmux.run("new-window", "-d", "-t", "w:")
    a = host_factory("a")
    a.register("main", role="main")
    worker = b.register("worker", deliver=f"tmux:{pane}")
    a.start_gateway(), b.start_gateway()
    lines = "".join(f"message {n}\n" for n in range(8))
    proc = a.bridge("send", worker, "-", "--lines", "--force", "--from", "main", input=lines, check=True)
    ids = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    assert len(ids) == 8

    def shown(msg_id: str) -> bool:
        return f"[end bridge {msg_id[:8]}]" in tmux.capture(pane, 500)

    wait_for(lambda: shown(ids[2]), timeout=30, what="the first messages in the pane")
    tmux.run("kill-pane", "-t", pane)

    def settled() -> bool:
        seen = output.read_text(errors="replace") if output.exists() else ""
        dead = _dead_letters(b, ids)
        return all(f"[end bridge {i[:8]}]" in seen or i in dead for i in ids) and all(
            i in dead for i in ids if f"[end bridge {i[:8]}]" not in seen
        )

    wait_for(settled, timeout=60, what="every message delivered or dead-lettered")
    seen = output.read_text(errors="replace")
    dead = _dead_letters(b, ids)
    # one worker per entity, in order: a message is tried only after the one before it was
    # acked or dead-lettered, so the dead letters are the tail of the stream and everything
    # before them reached the pane and was acked. (One typed while the pane died may show in
    # the pane and still be dead-lettered: it was never confirmed — at-least-once.)
    first_dead = next(n for n, msg_id in enumerate(ids) if msg_id in dead)
    assert first_dead >= 1 and set(dead) == set(ids[first_dead:])
    assert all(f"[end bridge {msg_id[:8]}]" in seen for msg_id in ids[:first_dead])
    for msg_id in ids[first_dead:]:
        row = dead[msg_id]
        assert row["reason"] == "delivery_failed" and f"tmux pane {pane} is gone" in row["detail"]
        assert int(row["attempts"]) == 3  # retried, then dead-lettered


def test_bridge_show_after_a_cut_delivery(host_factory, worker_pane) -> None:
    """A long message is cut in the pane with a `bridge show MSGID` line; that command, run
    on the worker's host, prints all of it."""
    b, tmux, pane = worker_pane
    b.write_config(f'[plugins.tmux]\nsocket = "{tmux.socket}"\nmax_inline_bytes = 200\n')
    a = host_factory("a")
    a.register("main", role="main")
    worker = b.register("worker", deliver=f"tmux:{pane}")
    a.start_gateway(), b.start_gateway()
    content = "\n".join(f"line {n:03d} " + "x" * 40 for n in range(60))
    sent = a.bridge_json("send", worker, content, "--from", "main")
    wait_for(
        lambda: f"[end bridge {sent['msgId'][:8]}]" in tmux.capture(pane, 200),
        timeout=30,
        what="the cut message in the pane",
    )
    screen = tmux.capture(pane, 200)
    command = re.search(r"read all of it with: (bridge show \S+)\]", screen)
    assert command and command.group(1) == f"bridge show {sent['msgId']}"
    assert "line 059" not in screen
    # the command exactly as the pane shows it, run on the worker's host
    printed = b.bridge(*command.group(1).split()[1:], env={"BRIDGE_GID": worker}, check=True).stdout
    assert all(line in printed for line in content.split("\n"))
    assert b.bridge_json("show", sent["msgId"])["content"] == content
