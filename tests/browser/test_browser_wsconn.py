"""The broker's per-connection sender (``server.WsConn``): frames go out inline while the peer
reads, fall back to the writer thread the moment a send would block (never blocking the
caller, which is usually another connection's reading thread inside the broker's send lock),
and arrive complete and in order either way."""

from __future__ import annotations

import json
import queue
import socket
import threading

import pytest
import websocket
from websockets.sync.server import serve

from bridgecli.browser import frames as F
from bridgecli.browser.connect import BrowserBridge
from bridgecli.browser.server import WsConn
from tests.browser.conftest import TOKEN, eventually
from tests.browser.test_browser_hostile import agent, ask


@pytest.fixture
def pair():
    """A real websockets server connection wrapped in WsConn (as the broker's handler does,
    send timeout included) and a websocket-client peer with a small receive buffer that reads
    only when the test says so."""
    conns: queue.Queue[WsConn] = queue.Queue()
    done = threading.Event()

    def handler(ws) -> None:
        ws.socket.settimeout(30.0)  # long: a blocking send would hang the test, not fail fast
        ws.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        conns.put(WsConn(ws))
        done.wait()

    server = serve(handler, "127.0.0.1", 0, compression=None, max_size=None)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    peer = websocket.WebSocket(sockopt=((socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024),))
    peer.connect(f"ws://127.0.0.1:{server.socket.getsockname()[1]}/", suppress_origin=True, timeout=10)
    conn = conns.get(timeout=5)
    yield conn, peer
    done.set()
    peer.close()
    server.shutdown()


def test_sends_go_out_inline_while_the_peer_reads(pair):
    conn, peer = pair
    for i in range(50):
        conn.send({"type": "event", "event": "n", "data": i})
        assert json.loads(peer.recv())["data"] == i
    assert conn.backlog == 0
    assert conn._writer is None  # no thread hand-off was ever needed


def test_a_send_that_would_block_falls_back_to_the_writer_and_keeps_order(pair):
    conn, peer = pair
    pad = "x" * 64 * 1024  # several frames fill both small TCP buffers
    sender = threading.Thread(
        target=lambda: [conn.send({"type": "event", "event": "n", "data": i, "pad": pad}) for i in range(64)]
    )
    sender.start()
    sender.join(timeout=5)
    assert not sender.is_alive(), "a send blocked on a peer that does not read"
    assert conn.backlog > 0 and conn._writer is not None
    got = [json.loads(peer.recv()) for _ in range(64)]  # now read: the writer drains
    assert [frame["data"] for frame in got] == list(range(64))
    assert all(frame["pad"] == pad for frame in got)  # a partly written frame was completed
    eventually(lambda: conn.backlog == 0)
    conn.send({"type": "event", "event": "after"})  # back on the inline path
    assert json.loads(peer.recv())["event"] == "after"


def test_a_stuck_agent_never_delays_the_others(port, cache, start_executor):
    """With a long send timeout the stuck agent stays connected while its results pile up in
    its writer's queue; the broker keeps answering everyone else meanwhile."""
    bridge = BrowserBridge(port, TOKEN, server_options={"send_timeout": 60.0}).start()
    try:
        start_executor("e1")
        stuck = agent(port)
        stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        assert ask(stuck, F.command(1, "open", "big"))["ok"]
        for i in range(2, 12):  # ~40 MiB of results it never reads
            stuck.send(json.dumps(F.command(i, "text", "big", {"pad": 4 * 1024 * 1024})))
        other = agent(port)
        assert ask(other, F.command(1, "open", "other"))["ok"]
        eventually(lambda: bridge.broker.snapshot()["pending"] == 0, timeout=30)
        for i in range(2, 20):
            assert ask(other, F.command(i, "text", "other"))["ok"]
            assert bridge.send("targets")
        assert len(bridge.broker.snapshot()["agents"]) == 3  # host, stuck (not cut off), other
        other.close()
        stuck.shutdown()
    finally:
        bridge.close()
