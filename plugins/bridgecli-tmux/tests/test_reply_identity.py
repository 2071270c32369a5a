"""``bridge reply|answer MSGID`` without ``--from`` or ``BRIDGE_GID`` speaks as the local
entity MSGID was delivered to — the agent in a hand-registered tmux pane runs the frame's
command as is, and the main must hear it from that agent, not from ``USER@HOSTID``.

Two simulated hosts on the session's real RabbitMQ, real gateways, a real tmux pane on b.
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
def pair(host_factory, short_tmp: Path):
    """Host a with a ``main`` (hold), host b with ``worker`` registered by hand on a tmux pane
    whose shell has b's environment and no ``BRIDGE_GID``; both gateways running. Yields
    ``(a, main gid, b, worker gid, tmux, pane)``."""
    b = host_factory("b")
    sock = str(short_tmp / "s")
    b.write_config(f'[plugins.tmux]\nsocket = "{sock}"\n')
    env = {k: v for k, v in b.env.items() if not k.startswith("TMUX") and k != "BRIDGE_GID"}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    shell = "env -u BRIDGE_GID PS1='worker$ ' bash --norc --noprofile"
    subprocess.run(
        ["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "w", "-x", "220", "-y", "50", shell],
        check=True,
        env=env,
    )
    tmux = Tmux(sock)
    pane = tmux.pane("w:").pane_id
    wait_for(lambda: "worker$" in tmux.capture(pane), what="the worker's prompt")
    pid = server_pid(sock)
    a = host_factory("a")
    main = a.register("main", role="main")
    worker = b.register("worker", deliver=f"tmux:{pane}")
    a.start_gateway(), b.start_gateway()
    try:
        yield a, main, b, worker, tmux, pane
    finally:
        stop_server(sock, pid)


def _in_pane(tmux: Tmux, pane: str, msg_id: str) -> str:
    """Wait until message ``msg_id`` is framed in the pane; return the screen."""
    wait_for(
        lambda: f"[end bridge {msg_id[:8]}]" in tmux.capture(pane, 300),
        timeout=30,
        what=f"message {msg_id[:8]} in the pane",
    )
    return tmux.capture(pane, 300)


def _sent(host, *args: str) -> str:
    return host.bridge_json(*args)["msgId"]


def _heard(host, gid: str, count: int = 1) -> list[dict]:
    """The next ``count`` messages held for ``gid`` (bounded waits, no timing assertion)."""
    got: list[dict] = []
    for _ in range(count * 3):
        got += host.bridge_json("poll", "--as", gid, "--wait", "20s")["messages"]
        if len(got) >= count:
            break
    assert len(got) == count, got
    return got


def _who(message: dict) -> tuple[str, str, str | None, str]:
    return message["kind"], message["content"], message["from"], message["fromLabel"]


def test_reply_typed_in_the_pane_speaks_as_the_pane_entity(pair) -> None:
    a, main, b, worker, tmux, pane = pair
    sent = _sent(a, "send", worker, "please review PR 7", "--from", "main")
    screen = _in_pane(tmux, pane, sent)
    command = re.search(r'answer with: (bridge reply \S+) "\.\.\."', screen)
    assert command and command.group(1) == f"bridge reply {sent}"

    # the agent runs the frame's command as is: no --from, no BRIDGE_GID in the pane
    tmux.run("send-keys", "-t", pane, "-l", f'{command.group(1)} "LGTM"')
    tmux.run("send-keys", "-t", pane, "Enter")
    [back] = _heard(a, main)
    assert _who(back) == ("REPLY", "LGTM", worker, "worker")
    assert back["inReplyTo"] == sent
    assert not any(e["label"].endswith(f"@{b.name}") for e in b.bridge_json("entities")["entities"])


def test_answer_to_an_ask_speaks_as_the_pane_entity(pair) -> None:
    a, main, b, worker, tmux, pane = pair
    asked = _sent(a, "ask", worker, "which port?", "--from", "main")
    _in_pane(tmux, pane, asked)
    b.bridge("answer", asked, "5672", check=True)
    [back] = _heard(a, main)
    assert _who(back) == ("ANSWER", "5672", worker, "worker")
    assert back["inReplyTo"] == asked


def test_from_and_bridge_gid_still_win(pair) -> None:
    a, main, b, worker, tmux, pane = pair
    other = b.register("other")
    sent = _sent(a, "send", worker, "who answers?", "--from", "main")
    _in_pane(tmux, pane, sent)
    b.bridge("reply", sent, "as delivered", check=True)
    b.bridge("reply", sent, "by --from", "--from", "other", check=True)
    b.bridge("reply", sent, "by BRIDGE_GID", env={"BRIDGE_GID": other}, check=True)
    heard = {m["content"]: m for m in _heard(a, main, 3)}
    assert _who(heard["as delivered"]) == ("REPLY", "as delivered", worker, "worker")
    assert _who(heard["by --from"]) == ("REPLY", "by --from", other, "other")
    assert _who(heard["by BRIDGE_GID"]) == ("REPLY", "by BRIDGE_GID", other, "other")


def test_an_id_this_host_did_not_deliver_keeps_the_default_sender(pair) -> None:
    a, main, b, worker, tmux, pane = pair
    gone = b.register("gone")
    to_worker = _sent(a, "send", worker, "to the pane", "--from", "main")
    to_gone = _sent(a, "send", gone, "to an entity unregistered later", "--from", "main")
    on_a = _sent(b, "send", main, "to a's main", "--from", "worker")
    _in_pane(tmux, pane, to_worker)
    assert [m["msgId"] for m in _heard(b, gone)] == [to_gone]
    assert [m["msgId"] for m in _heard(a, main)] == [on_a]
    b.bridge("unregister", "gone", check=True)

    b.bridge("reply", to_worker, "from the pane entity", check=True)
    # delivered here, but to an entity no longer on this host: the default identity speaks
    proc = b.bridge("reply", to_gone, "from the default identity", check=True)
    assert "registered now" in proc.stderr
    # a message delivered on another host is not one this host can answer, as anyone
    refused = b.bridge("reply", on_a, "must not go out")
    assert refused.returncode != 0 and "no message" in refused.stderr

    heard = {m["content"]: m for m in _heard(a, main, 2)}
    assert _who(heard["from the pane entity"]) == ("REPLY", "from the pane entity", worker, "worker")
    default = heard["from the default identity"]
    assert default["from"] not in (worker, gone) and default["fromLabel"].endswith(f"@{b.name}")
    assert a.bridge_json("poll", "--as", main)["messages"] == []


def test_direct_path_without_a_gateway_speaks_as_the_pane_entity(pair) -> None:
    a, main, b, worker, tmux, pane = pair
    sent = _sent(a, "send", worker, "answer after your gateway stops", "--from", "main")
    asked = _sent(a, "ask", worker, "and this one?", "--from", "main")
    _in_pane(tmux, pane, sent), _in_pane(tmux, pane, asked)
    b.stop_gateway()  # the store keeps who each message was delivered to

    b.bridge("reply", sent, "direct reply", check=True)
    b.bridge("answer", asked, "direct answer", check=True)
    heard = {m["content"]: m for m in _heard(a, main, 2)}
    assert _who(heard["direct reply"]) == ("REPLY", "direct reply", worker, "worker")
    assert _who(heard["direct answer"]) == ("ANSWER", "direct answer", worker, "worker")
