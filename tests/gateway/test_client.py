"""The gateway client's transport (``_socket``, not ``socket.py``) frames and fails as the
buffered socket file it replaced did: one answer line per request, bytes past a newline kept
for the next answer, the same typed errors for a timeout, a lost and a closed connection."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

from bridgecli import errors
from bridgecli.gateway.client import GatewayClient, LineConnection


@pytest.fixture
def server():
    """A Unix socket in a short temp dir; yields (path, serve) where ``serve(handler)`` runs
    ``handler(conn)`` on the next connection in a thread."""
    root = tempfile.mkdtemp(prefix="gc", dir="/tmp")
    path = os.path.join(root, "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    threads = []

    def serve(handler):
        def run():
            conn, _ = listener.accept()
            with conn:
                handler(conn)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)

    yield path, serve
    listener.close()
    for thread in threads:
        thread.join(5)
    os.unlink(path)
    os.rmdir(root)


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        data += conn.recv(4096)
    return data


def test_no_listener_is_none_and_require_names_the_fix(tmp_path):
    missing = str(tmp_path / "none.sock")
    assert LineConnection.connect(missing, 0.2) is None
    assert GatewayClient.connect(missing) is None
    with pytest.raises(errors.GatewayUnavailable, match="no gateway is listening on .*bridge gateway"):
        GatewayClient.require(missing)


def test_answers_split_across_reads_and_packed_in_one_read_each_come_back_whole(server):
    path, serve = server

    def handler(conn):
        _read_request(conn)
        conn.sendall(b'{"ok": true, "n": ')
        conn.sendall(b'1, "pad": "' + b"x" * 200_000 + b'"}\n')
        _read_request(conn)
        conn.sendall(b'{"ok": true, "n": 2}\n{"ok": true, "n": 3}\n')
        _read_request(conn)

    serve(handler)
    with GatewayClient.require(path) as client:
        first = client.call("a")
        assert first["n"] == 1 and len(first["pad"]) == 200_000
        assert client.call("b")["n"] == 2
        assert client.call("c")["n"] == 3  # already read with the previous answer


def test_the_request_is_one_compact_json_line(server):
    path, serve = server
    seen = []

    def handler(conn):
        seen.append(_read_request(conn))
        conn.sendall(b'{"ok": true}\n')

    serve(handler)
    with GatewayClient.require(path) as client:
        assert client.call("send", target="bob", contents=["hé"]) == {"ok": True}
    assert seen == [b'{"op":"send","target":"bob","contents":["h\\u00e9"]}\n']


def test_a_typed_error_from_the_gateway_is_raised_with_its_exit_code(server):
    path, serve = server

    def handler(conn):
        _read_request(conn)
        conn.sendall(b'{"ok": false, "error": {"code": "NOT_FOUND", "message": "no such target", "hint": "list"}}\n')

    serve(handler)
    with GatewayClient.require(path) as client, pytest.raises(errors.NotFound) as caught:
        client.call("send")
    assert str(caught.value) == "no such target — list"
    assert caught.value.exit_code == errors.ExitCode.NOT_FOUND


def test_a_silent_gateway_is_a_timeout_and_the_connection_is_not_reused(server):
    path, serve = server
    release = threading.Event()

    def handler(conn):
        _read_request(conn)
        conn.sendall(b'{"ok": tr')  # half an answer, then nothing
        release.wait(5)

    serve(handler)
    client = GatewayClient.require(path)
    with pytest.raises(errors.Timeout, match="did not answer 'status' within 0.2s"):
        client.call("status", timeout=0.2)
    with pytest.raises(errors.GatewayUnavailable, match="lost the connection to the gateway"):
        client.call("status", timeout=0.2)  # the half-read answer must never be taken for this one
    release.set()
    client.close()


def test_a_gateway_that_hangs_up_is_unavailable(server):
    path, serve = server
    serve(lambda conn: _read_request(conn))
    with GatewayClient.require(path) as client:
        with pytest.raises(errors.GatewayUnavailable, match="the gateway closed the connection"):
            client.call("status")


def test_importing_the_client_loads_neither_socket_py_nor_the_error_types():
    """What keeps the one-shot send and a TAB cheap (docs/decisions/raw-socket-client.md)."""
    code = "import sys, bridgecli.gateway.client\nprint(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert not {"socket", "selectors", "bridgecli.errors"} & set(loaded)
