"""Pins ``bridgecli.private_apis.websockets_events`` to ``websockets.sync``: the classes it
subclasses call ``process_event(event)`` from the reading thread, per frame, in order and
outside the protocol lock (so the callback may send), and the documented
``create_connection=`` argument puts the subclasses in place, on both sides of a real
connection."""

from __future__ import annotations

import inspect
import queue
import threading
from collections.abc import Iterator

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame
from websockets.sync.client import ClientConnection, connect
from websockets.sync.connection import Connection
from websockets.sync.server import ServerConnection, serve

from bridgecli.private_apis.websockets_events import DispatchingClientConnection, DispatchingServerConnection

LEGACY = {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}


@pytest.mark.parametrize("base", [Connection, ClientConnection, ServerConnection])
def test_the_subclassed_classes_have_process_event_of_one_event(base):
    assert list(inspect.signature(base.process_event).parameters) == ["self", "event"]


def test_connect_and_serve_take_a_connection_class():
    assert "create_connection" in inspect.signature(connect).parameters
    assert "create_connection" in inspect.signature(serve).parameters


class _Probe(DispatchingServerConnection):
    """Records, per data frame, whether the protocol lock was free when process_event ran."""

    lock_free: list[bool] = []

    def process_event(self, event: object) -> None:
        if isinstance(event, Frame):
            free = self.protocol_mutex.acquire(blocking=False)
            if free:
                self.protocol_mutex.release()
            self.lock_free.append(free)
        super().process_event(event)


@pytest.fixture
def echo() -> Iterator[tuple[int, list[str]]]:
    """A server on the probe class: each text frame is echoed from the dispatch callback (on
    websockets' reading thread); what still arrives through ``recv()`` is echoed marked
    ``queued:``. Yields (port, names of the threads the callback ran on)."""
    threads: list[str] = []

    def handler(ws: _Probe) -> None:
        def dispatch(data: str | bytes) -> None:
            threads.append(threading.current_thread().name)
            ws.send("echo:" + (data.decode() if isinstance(data, bytes) else data))

        ws.enable_dispatch(dispatch)
        try:
            while True:
                data = ws.recv()
                ws.send("queued:" + (data.decode() if isinstance(data, bytes) else data))
        except ConnectionClosed:
            pass

    _Probe.lock_free = []
    server = serve(handler, "127.0.0.1", 0, create_connection=_Probe, compression=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.socket.getsockname()[1], threads
    server.shutdown()
    thread.join(5)


def _client(port: int) -> tuple[DispatchingClientConnection, queue.Queue[str | bytes]]:
    ws = connect(f"ws://127.0.0.1:{port}", create_connection=DispatchingClientConnection, open_timeout=5, **LEGACY)
    assert isinstance(ws, DispatchingClientConnection)
    received: queue.Queue[str | bytes] = queue.Queue()
    ws.enable_dispatch(received.put)
    return ws, received


def test_frames_come_in_order_from_the_reading_thread_which_may_send(echo):
    port, threads = echo
    ws, received = _client(port)
    with ws:
        for n in range(200):
            ws.send(f"m{n}")
        answers = [received.get(timeout=5) for _ in range(200)]
    assert answers == [f"echo:m{n}".encode() for n in range(200)]
    assert _Probe.lock_free and all(_Probe.lock_free)
    assert set(threads) and threading.main_thread().name not in threads


def test_a_fragmented_message_sends_the_rest_through_the_queue_in_order(echo):
    port, _ = echo
    ws, received = _client(port)
    with ws:
        ws.send("before")
        assert received.get(timeout=5) == b"echo:before"
        ws.send(iter(["frag", "mented"]))  # text in continuation frames
        ws.send("after")
        assert [received.get(timeout=5) for _ in range(2)] == [b"queued:fragmented", b"queued:after"]
    assert all(_Probe.lock_free)
