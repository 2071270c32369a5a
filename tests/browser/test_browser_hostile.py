"""A hostile raw-WebSocket client against the real server: the broker refuses what it must,
answers junk with documented errors/close codes, stays up, and never routes a command into a
group the caller does not own."""

from __future__ import annotations

import json
import threading

import pytest
import websocket

from bridgecli.browser import frames as F
from bridgecli.browser.connect import BrowserBridge
from tests.browser.conftest import TOKEN, eventually
from tests.browser.fake_executor import ORIGIN


@pytest.fixture
def strict_host(port, cache):
    """A host with short timers and small limits so the hostile cases run fast."""
    bridge = BrowserBridge(
        port,
        TOKEN,
        label="host",
        server_options={"hello_timeout": 0.5, "keepalive": 0.3, "max_frame": 256 * 1024, "max_connections": 16},
    ).start()
    yield bridge
    bridge.close()


def raw(port: int, origin: str | None = None) -> websocket.WebSocket:
    options = {"origin": origin} if origin else {"suppress_origin": True}
    return websocket.create_connection(f"ws://127.0.0.1:{port}/", timeout=5, **options)


def close_code(ws: websocket.WebSocket) -> int | None:
    """Read until the server's close frame; return its code (None if the TCP just dropped)."""
    try:
        while True:
            opcode, data = ws.recv_data(control_frame=True)
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                code = int.from_bytes(data[:2], "big") if len(data) >= 2 else None
                ws.send_close()  # answer the close like a well-behaved peer, then hang up
                return code
    except (websocket.WebSocketConnectionClosedException, ConnectionError):
        return None
    finally:
        ws.shutdown()


def agent(port: int) -> websocket.WebSocket:
    ws = raw(port)
    ws.send(json.dumps(F.hello(TOKEN, "agent")))
    assert json.loads(ws.recv())["type"] == "ready"
    return ws


def ask(ws: websocket.WebSocket, frame: dict) -> dict:
    ws.send(json.dumps(frame))
    while True:
        reply = json.loads(ws.recv())
        if reply["type"] != "ping":
            return reply


def still_serving(bridge: BrowserBridge) -> None:
    assert bridge.send("targets") is not None
    ws = agent(bridge.port)
    assert ask(ws, F.command(1, "targets", None))["ok"] is True
    ws.close()


def test_binds_loopback_only(strict_host):
    assert strict_host.server._server.socket.getsockname()[0] == "127.0.0.1"


@pytest.mark.parametrize("origin", ["http://127.0.0.1:8000", "http://localhost:4517", "null", "https://evil.example"])
def test_web_page_origins_are_refused_at_the_handshake(strict_host, origin):
    with pytest.raises(websocket.WebSocketBadStatusException) as info:
        raw(strict_host.port, origin)
    assert info.value.status_code == F.HTTP_FORBIDDEN
    still_serving(strict_host)


@pytest.mark.parametrize("origin", [ORIGIN, "moz-extension://0f1e2d3c-aaaa-bbbb-cccc-1234567890ab"])
def test_extension_origins_are_accepted(strict_host, origin):
    ws = raw(strict_host.port, origin)
    ws.send(json.dumps(F.hello(TOKEN, "extension", id="x1")))
    assert json.loads(ws.recv())["type"] == "ready"
    ws.close()


@pytest.mark.parametrize(
    "hello, code",
    [
        ({"v": 1, "type": "hello", "token": "wrong", "role": "agent"}, F.CLOSE_BAD_TOKEN),
        ({"v": 1, "type": "hello", "token": TOKEN[:-1], "role": "agent"}, F.CLOSE_BAD_TOKEN),
        ({"v": 1, "type": "hello", "token": "", "role": "agent"}, F.CLOSE_BAD_TOKEN),
        ({"v": 1, "type": "hello", "role": "agent"}, F.CLOSE_BAD_HELLO),
        ({"v": 1, "type": "command", "token": TOKEN}, F.CLOSE_BAD_HELLO),
        ({"v": 2, "type": "hello", "token": TOKEN}, F.CLOSE_BAD_VERSION),
        ("not json at all", F.CLOSE_BAD_HELLO),
    ],
)
def test_bad_hellos_are_closed_with_documented_codes(strict_host, hello, code):
    ws = raw(strict_host.port)
    ws.send(hello if isinstance(hello, str) else json.dumps(hello))
    assert close_code(ws) == code
    assert strict_host.broker.snapshot()["agents"] == [strict_host._local.client_id]
    still_serving(strict_host)


def test_silent_connection_is_closed_after_the_hello_deadline(strict_host):
    assert close_code(raw(strict_host.port)) == F.CLOSE_BAD_HELLO


def test_oversize_frames_close_1009_and_the_broker_stays_up(strict_host):
    ws = raw(strict_host.port)
    ws.send("x" * (F.MAX_HELLO_BYTES + 1))  # before hello: 64 KiB limit
    assert close_code(ws) == F.CLOSE_TOO_BIG
    ws = agent(strict_host.port)
    ws.send(json.dumps(F.command(1, "targets", None, {"pad": "x" * 200_000})))  # < 256 KiB: fine
    assert json.loads(ws.recv())["ok"] is True
    ws.send("x" * (256 * 1024 + 1))
    assert close_code(ws) == F.CLOSE_TOO_BIG
    still_serving(strict_host)


def test_garbage_gets_error_frames_then_a_close(strict_host):
    ws = agent(strict_host.port)
    for junk in ("{", "[]", '"str"', '{"no": "type"}'):
        ws.send(junk)
        reply = json.loads(ws.recv())
        assert reply["type"] == "error" and reply["error"]["code"] == F.E_BAD_FRAME
    ws.send_binary(b"\xff\x00\xfe")
    assert json.loads(ws.recv())["error"]["code"] == F.E_BAD_FRAME
    reply = ask(ws, {"type": "command", "id": 9, "action": "rm -rf", "group": "g"})
    assert reply == F.fail(9, F.E_UNKNOWN_ACTION, reply["error"]["message"])
    reply = ask(ws, {"type": "result", "id": "b1", "ok": True})  # agents may not answer
    assert reply["type"] == "error"
    for _ in range(F.MAX_BAD_FRAMES - 5):
        ws.send("{")
    assert close_code(ws) == F.CLOSE_PROTOCOL
    still_serving(strict_host)


def test_second_agent_never_reaches_an_owned_group(strict_host, start_executor):
    executor = start_executor("e1")
    owner = agent(strict_host.port)
    assert ask(owner, F.command(1, "open", "secret", {"url": "http://a"}))["ok"]
    intruder = agent(strict_host.port)
    before = len(executor.commands)
    for action, params in (
        ("text", {}),
        ("navigate", {"url": "http://evil"}),
        ("open", {}),
        ("close", {}),
        ("screenshot", {}),
        ("tabs", {}),
        ("release", {}),
    ):
        reply = ask(intruder, F.command(action, action, "secret", params, target="e1"))
        assert reply["error"] == {"code": F.E_NOT_OWNER, "message": 'group "secret" is owned by another client'}
    intruder.send(json.dumps(F.ok("b1", {"groups": []})))  # forging an executor result
    assert json.loads(intruder.recv())["type"] == "error"
    assert len(executor.commands) == before  # nothing was forwarded for the intruder
    assert executor.groups["secret"][0]["url"] == "http://a"
    assert ask(owner, F.command(2, "text", "secret"))["ok"]
    owner.close()
    intruder.close()


def test_connect_flood_is_bounded_and_the_broker_survives(strict_host, start_executor):
    start_executor("e1")
    codes: list[int | None] = []
    lock = threading.Lock()

    def hostile(i: int) -> None:
        try:
            ws = raw(strict_host.port)
        except Exception:
            with lock:
                codes.append(-1)
            return
        if i % 3 == 0:
            ws.send(json.dumps({"type": "hello", "token": f"guess{i}", "role": "agent"}))
        code = close_code(ws)  # the rest stay silent until the hello deadline
        with lock:
            codes.append(code)

    threads = [threading.Thread(target=hostile, args=(i,)) for i in range(60)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(codes) == 60
    assert F.CLOSE_TRY_LATER in codes  # more than max_connections at once were turned away
    assert set(codes) <= {F.CLOSE_TRY_LATER, F.CLOSE_BAD_TOKEN, F.CLOSE_BAD_HELLO, None, -1}
    for _ in range(100):  # slots free up as the refused handlers finish their close handshakes
        if strict_host._local is not None and len(threading.enumerate()) < 20:
            break
        threading.Event().wait(0.05)
    still_serving(strict_host)
    local = strict_host._local.client_id
    eventually(lambda: strict_host.broker.snapshot()["agents"] == [local])
    assert strict_host.broker.snapshot()["executors"] == ["e1"]


def test_keepalive_pings_quiet_connections_and_pong_answers_ping(strict_host, start_executor):
    executor = start_executor("e1")
    ws = agent(strict_host.port)
    ws.settimeout(5)
    assert json.loads(ws.recv()) == F.PING  # after 0.3 s of silence (limit: ≤ 15 s)
    assert ask(ws, F.PING) == F.PONG
    ws.close()
    deadline = threading.Event()
    for _ in range(100):
        if executor.pings:
            break
        deadline.wait(0.05)
    assert executor.pings >= 1


def test_fragmented_messages_are_reassembled_and_order_is_kept(strict_host, start_executor):
    """Fragmented frames take the queued path; everything after them stays in order."""
    start_executor("e1")
    ws = agent(strict_host.port)
    first = json.dumps(F.command(1, "open", "frag", {"url": "http://f"}))
    half = len(first) // 2
    ws.send_frame(websocket.ABNF.create_frame(first[:half], websocket.ABNF.OPCODE_TEXT, fin=0))
    ws.send_frame(websocket.ABNF.create_frame(first[half:], websocket.ABNF.OPCODE_CONT, fin=1))
    for i in range(2, 12):
        ws.send(json.dumps(F.command(i, "text", "frag")))
    ids = []
    while len(ids) < 11:
        reply = json.loads(ws.recv())
        if reply["type"] == "result":
            assert reply["ok"], reply
            ids.append(reply["id"])
    assert ids == list(range(1, 12))
    ws.close()


def test_same_executor_id_replaces_the_old_socket(strict_host, start_executor):
    old = start_executor("e1", reconnect=False)
    strict_host.send("open", "g", {"url": "http://old"})
    # the same browser, reconnecting on a new socket, still has its group open
    start_executor("e1", groups={"g": [{"tab": 1, "url": "http://new", "title": ""}]})
    eventually(lambda: F.CLOSE_REPLACED in old.close_codes)
    assert strict_host.send("text", "g")["text"] == "text of http://new"
    assert strict_host.broker.snapshot()["executors"] == ["e1"]


def test_an_agent_that_stops_reading_is_cut_off_not_the_broker(port, cache, start_executor):
    bridge = BrowserBridge(port, TOKEN, server_options={"send_timeout": 0.5}).start()
    try:
        start_executor("e1")
        stuck = agent(port)
        stuck.send(json.dumps(F.command(1, "open", "big")))
        assert json.loads(stuck.recv())["ok"]
        for i in range(2, 12):  # ~40 MiB of results it never reads: TCP buffers fill up
            stuck.send(json.dumps(F.command(i, "text", "big", {"pad": 4 * 1024 * 1024})))
        eventually(lambda: len(bridge.broker.snapshot()["agents"]) == 1, timeout=30)
        bridge.send("open", "other")
        assert bridge.send("text", "other")["executor"] == "e1"  # everyone else still served
        stuck.shutdown()
    finally:
        bridge.close()
