"""A line-at-a-time Unix stream connection on ``_socket``, the C module ``socket.py`` wraps.

Relies on ``_socket`` (undocumented): its ``socket`` class, the base of ``socket.socket``, with
``settimeout``, ``connect``, ``sendall``, ``recv`` and ``close`` behaving as documented for
``socket.socket`` (a timeout raises ``TimeoutError``), and ``AF_UNIX``/``SOCK_STREAM``. Gains:
``socket.py`` (its enums, ``selectors``) cost 5–8 ms of a one-shot ``bridge send``
(docs/decisions/raw-socket-client.md). If ``_socket`` changes,
``tests/private_apis/test_unix_socket.py`` fails: import ``socket`` here instead (same names
and methods), at that cost.
"""

from __future__ import annotations

import _socket


class LineConnection:
    """One connected Unix stream socket carrying lines, a request out and its answer in, in
    turn. Errors are the operating system's: ``TimeoutError`` when a send or a read outlasts
    the timeout, another ``OSError`` when the connection fails."""

    __slots__ = ("_sock", "_pending")

    def __init__(self, sock: _socket.socket) -> None:
        self._sock = sock
        self._pending = b""  # bytes read past the last answer's newline

    @classmethod
    def connect(cls, path: str, timeout: float | None) -> LineConnection | None:
        """A connection to the socket at ``path``, or None when nothing accepts it there within
        ``timeout`` seconds (missing file, refused, not a socket, too slow)."""
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError:  # TimeoutError, FileNotFoundError and ConnectionRefusedError included
            sock.close()
            return None
        return cls(sock)

    def exchange(self, line: bytes, timeout: float | None) -> bytes:
        """Send ``line`` (newline-terminated) and return the next line received, with its
        newline; ``b""`` when the peer closed first. ``timeout`` bounds each send and each
        read, as a socket timeout does; None waits as long as it takes. After an error the
        connection is closed: an answer may be half read, so no later line could be trusted."""
        try:
            self._sock.settimeout(timeout)
            self._sock.sendall(line)
            return self._read_line()
        except BaseException:
            self._sock.close()
            raise

    def _read_line(self) -> bytes:
        end = self._pending.find(b"\n")
        if end >= 0:
            line, self._pending = self._pending[: end + 1], self._pending[end + 1 :]
            return line
        parts = [self._pending]
        while True:
            chunk = self._sock.recv(65536)
            if not chunk:  # closed: a partial last line is still returned, as readline does
                self._pending = b""
                return b"".join(parts)
            end = chunk.find(b"\n")
            if end >= 0:
                parts.append(chunk[: end + 1])
                self._pending = chunk[end + 1 :]
                return b"".join(parts)
            parts.append(chunk)

    def close(self) -> None:
        self._sock.close()
