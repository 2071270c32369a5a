"""A waiting ``poll`` or ``send`` is held on the local API's loop for its first wait, with no
thread of its own. Each way out of that hold is driven through a real gateway and its socket:
answered early (also to a client that half-closed its socket, which then left without
confirming), answered by a worker after the
first wait ran out, and answered by a worker when the early answer was too big to give."""

from __future__ import annotations

import json
import socket
import time

from bridgecli.gateway.api.answers import EARLY_MAX
from tests.multihost.helpers import wait_for


def _request(host, request: dict, half_close: bool = False) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(str(host.socket))
    sock.sendall(json.dumps(request).encode() + b"\n")
    if half_close:
        sock.shutdown(socket.SHUT_WR)  # as `nc -N` does: it still reads the answer
    return sock


def _answers(sock: socket.socket, count: int) -> list[dict]:
    lines = sock.makefile("rb")
    return [json.loads(lines.readline()) for _ in range(count)]


def test_a_held_poll_is_answered_early_then_late_then_when_too_big(host_factory):
    a = host_factory("a")
    main = a.register("main", role="main")
    a.register("peer")
    a.start_gateway()

    # answered from the commit, to a client that can no longer write
    early = _request(a, {"op": "poll", "gid": main, "wait": 30, "confirm": True}, half_close=True)
    wait_for(lambda: a.waiting(main), what="the poll held in the gateway")
    sent = a.bridge_json("send", main, "early", "--from", "peer")
    [answer] = _answers(early, 1)
    assert answer["ok"] and [m["msgId"] for m in answer["messages"]] == [sent["msgId"]]
    assert answer["pending"] == [sent["msgId"]]
    early.close()  # without a confirm: the message is held again
    again = wait_for(lambda: a.bridge_json("poll", "--as", main, "--wait", "2s")["messages"], what="held again")
    assert [m["msgId"] for m in again] == [sent["msgId"]]

    # not answered in its first wait: a worker waits on, and the connection serves on after it
    late = _request(a, {"op": "poll", "gid": main, "wait": 30})
    wait_for(lambda: a.waiting(main), what="the second poll held in the gateway")
    time.sleep(1.5)  # past the first wait (one second): a worker has taken the poll on
    sent = a.bridge_json("send", main, "late", "--from", "peer")
    late.sendall(b'{"op": "status"}\n')
    answer, status = _answers(late, 2)
    assert [m["content"] for m in answer["messages"]] == ["late"] and status["ok"]
    late.close()

    # too big to be given from the commit: the request's worker gives it
    big = _request(a, {"op": "poll", "gid": main, "wait": 30})
    wait_for(lambda: a.waiting(main), what="the third poll held in the gateway")
    content = "x" * (EARLY_MAX + 1)
    a.bridge("send", main, content, "--from", "peer", check=True)
    [answer] = _answers(big, 1)
    assert [m["content"] for m in answer["messages"]] == [content]
    big.close()

    wait_for(lambda: not a.waiting(main), what="no poll left waiting")
    assert a.bridge_json("poll", "--as", main)["messages"] == [], "each message given once"
    assert "Traceback" not in a.log() and "held wait failed" not in a.log() and "local API" not in a.log()
