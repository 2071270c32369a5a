"""The guest agent client against a real broker: correlation, timeout, abort, lost host,
reconnect with backoff, refused token, not-a-broker."""

from __future__ import annotations

import socket
import threading

import pytest

from bridgecli.browser import frames as F
from bridgecli.browser.agent_client import AgentClient, NotConnected, connect_with_backoff
from bridgecli.browser.connect import BrowserBridge
from bridgecli.errors import PermissionProblem
from tests.browser.conftest import TOKEN, eventually


def url(port: int) -> str:
    return f"ws://127.0.0.1:{port}/"


@pytest.fixture
def client(host):
    agent = AgentClient.open(url(host.port), TOKEN, label="t")
    yield agent
    agent.close()


def test_concurrent_requests_get_their_own_results(host, client, start_executor):
    start_executor("e1")
    client.request("open", "g", {"url": "http://start"})
    results: dict[int, str] = {}

    def worker(i: int) -> None:
        # later requests answer first: results arrive out of order
        data = client.request("navigate", "g", {"url": f"http://n{i}", "sleep": (8 - i) * 0.02})
        results[i] = data["url"]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == {i: f"http://n{i}" for i in range(8)}


def test_timeout_then_late_result_is_dropped(host, client, start_executor):
    start_executor("e1")
    client.request("open", "g")
    with pytest.raises(F.CommandError) as info:
        client.request("text", "g", {"sleep": 0.5}, timeout=0.1)
    assert info.value.code == F.E_TIMEOUT
    assert client.request("text", "g")["text"] == "text of about:blank"
    eventually(lambda: host.broker.snapshot()["pending"] == 0)


def test_abort(host, client, start_executor):
    start_executor("e1")
    client.request("open", "g")
    abort = threading.Event()
    threading.Timer(0.1, abort.set).start()
    with pytest.raises(F.CommandError) as info:
        client.request("text", "g", {"sleep": 1.0}, abort=abort, timeout=10)
    assert info.value.code == F.E_ABORTED
    pre_set = threading.Event()
    pre_set.set()
    with pytest.raises(F.CommandError, match="aborted"):
        client.request("text", "g", {"sleep": 0.5}, abort=pre_set)


def test_executor_failure_comes_back_as_command_error(host, client, start_executor):
    start_executor("e1")
    client.request("open", "g")
    with pytest.raises(F.CommandError) as info:
        client.request("click", "g", {"selector": "#nope", "fail": True})
    assert info.value.code == F.E_EXECUTOR and "Element not found" in str(info.value)


def test_events_reach_the_owner(host, start_executor):
    executor = start_executor("e1")
    seen: list[dict] = []
    agent = AgentClient.open(url(host.port), TOKEN, on_event=seen.append)
    agent.request("open", "g")
    executor.send_event("tab_updated", "g", {"tab": 101})
    eventually(lambda: seen)
    assert seen[0]["event"] == "tab_updated" and seen[0]["executor"] == "e1"
    agent.close()


def test_lost_host_fails_waiting_requests_at_once(port, cache, start_executor):
    host = BrowserBridge(port, TOKEN).start()
    start_executor("e1")
    closed = threading.Event()
    agent = AgentClient.open(url(port), TOKEN, on_close=lambda c: closed.set())
    agent.request("open", "g")
    threading.Timer(0.2, host.close).start()
    with pytest.raises(F.CommandError) as info:
        agent.request("text", "g", {"sleep": 5}, timeout=30)
    # the closing host may drop the executor before the agent (it answers executor_gone) or
    # the agent first (not_connected): either way the request fails at once, not after 30 s
    assert info.value.code in (F.E_NOT_CONNECTED, F.E_EXECUTOR_GONE)
    assert closed.wait(5) and not agent.connected
    with pytest.raises(F.CommandError, match="not connected"):
        agent.request("targets")


def test_reconnect_with_backoff_until_a_broker_appears(port, cache):
    attempts = []
    threading.Timer(0.3, lambda: started.append(BrowserBridge(port, TOKEN).start())).start()
    started: list[BrowserBridge] = []
    agent = connect_with_backoff(url(port), TOKEN, give_up_after=10, before_attempt=lambda: attempts.append(1))
    try:
        assert len(attempts) > 1 and agent.request("targets")["targets"] == []
    finally:
        agent.close()
        started[0].close()


def test_backoff_gives_up_with_not_connected(port):
    with pytest.raises(NotConnected, match="no browser broker answers"):
        connect_with_backoff(url(port), TOKEN, give_up_after=0.3)


def test_refused_token_is_final_not_retried(host):
    attempts = []
    with pytest.raises(PermissionProblem, match="refused our token"):
        connect_with_backoff(url(host.port), "wrong-token", give_up_after=5, before_attempt=lambda: attempts.append(1))
    assert len(attempts) == 1


def test_a_port_held_by_something_else_is_not_a_broker(port):
    with socket.create_server(("127.0.0.1", port)) as listener:

        def answer_http() -> None:
            conn, _ = listener.accept()
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            conn.close()

        threading.Thread(target=answer_http, daemon=True).start()
        with pytest.raises(NotConnected, match="HTTP 404"):
            AgentClient.open(url(port), TOKEN, timeout=2)


def test_a_reset_during_the_handshake_is_not_connected(port):
    """A host dying mid-handshake (seen in failover) must be a retryable NotConnected, not a
    stray websockets exception that kills the re-election thread."""
    import struct

    with socket.create_server(("127.0.0.1", port)) as listener:

        def reset() -> None:
            conn, _ = listener.accept()
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # RST instead of an HTTP answer

        threading.Thread(target=reset, daemon=True).start()
        with pytest.raises(NotConnected):
            AgentClient.open(url(port), TOKEN, timeout=2)
