"""Pins ``bridgecli.private_apis.unix_socket`` to the C module ``_socket``: the names and socket
methods it calls exist, behave as ``socket.socket``'s (whose base class it is), and carry real
lines over a real Unix socket, with the operating system's errors."""

from __future__ import annotations

import _socket
import os
import socket
import tempfile
import threading

import pytest

from bridgecli.private_apis.unix_socket import LineConnection

USED = ("settimeout", "connect", "sendall", "recv", "close")


@pytest.fixture
def listener():
    """A listening Unix socket (socket.py's, the public API) in a short temp dir: (path, sock)."""
    root = tempfile.mkdtemp(prefix="pa", dir="/tmp")
    path = os.path.join(root, "s.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(2)
    yield path, sock
    sock.close()
    os.unlink(path)
    os.rmdir(root)


def test_the_names_used_exist_and_are_what_socket_py_wraps():
    assert (_socket.AF_UNIX, _socket.SOCK_STREAM) == (socket.AF_UNIX, socket.SOCK_STREAM)
    assert issubclass(socket.socket, _socket.socket)
    for name in USED:
        assert callable(getattr(_socket.socket, name)), name
    # socket.socket adds to close() only its file objects' bookkeeping: the rest, whose documented
    # behaviour this module relies on, is the C code itself
    for name in ("settimeout", "connect", "sendall", "recv"):
        assert getattr(socket.socket, name) is getattr(_socket.socket, name), name


def test_lines_go_out_and_come_back_over_a_real_unix_socket(listener):
    path, sock = listener
    seen = []

    def serve():
        conn, _ = sock.accept()
        with conn, conn.makefile("rb") as lines:
            for answer in (b"one\n", b"two\nthree\n", b"", b"x" * 100_000 + b"\n", b""):
                seen.append(lines.readline())
                conn.sendall(answer)  # none for the third (already sent) and the last (hangs up)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    connection = LineConnection.connect(path, 2.0)
    assert connection is not None
    try:
        assert connection.exchange(b"a\n", 2.0) == b"one\n"
        assert connection.exchange("é\n".encode(), 2.0) == b"two\n"
        assert connection.exchange(b"c\n", 2.0) == b"three\n"  # kept from the previous read
        assert connection.exchange(b"d\n", 2.0) == b"x" * 100_000 + b"\n"
        assert connection.exchange(b"e\n", 2.0) == b""  # the peer closed
    finally:
        connection.close()
    thread.join(5)
    assert seen == [b"a\n", "é\n".encode(), b"c\n", b"d\n", b"e\n"]


def test_a_timeout_is_timeout_error_and_other_failures_are_os_errors(listener, tmp_path):
    path, sock = listener
    raw = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    raw.settimeout(0.2)
    raw.connect(path)
    conn, _ = sock.accept()
    try:
        with pytest.raises(TimeoutError):
            raw.recv(10)
    finally:
        raw.close()
        conn.close()
    refused = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    with pytest.raises(FileNotFoundError):
        refused.connect(str(tmp_path / "none.sock"))
    refused.close()
    assert LineConnection.connect(str(tmp_path / "none.sock"), 0.2) is None


def test_a_silent_peer_times_the_exchange_out_and_closes_the_connection(listener):
    path, sock = listener
    connection = LineConnection.connect(path, 2.0)
    assert connection is not None
    conn, _ = sock.accept()
    try:
        with pytest.raises(TimeoutError):
            connection.exchange(b"status\n", 0.2)
        with pytest.raises(OSError):
            connection.exchange(b"status\n", 0.2)  # closed after the error: never reused
    finally:
        conn.close()
