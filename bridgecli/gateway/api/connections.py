"""One client connection of the local API, as the loop thread, the workers and the thread that
hands messages over each write to it.

At most one request of a connection is in progress at a time (the protocol is one response per
request, in order), so only the thread serving that request writes: the loop thread without
blocking (the rest when the socket is writable again), a worker or the early answer's thread
(:class:`SocketAnswer`) as their own.
"""

from __future__ import annotations

import enum
import select
import socket
import threading
from collections.abc import Callable
from typing import Any, Protocol

from bridgecli import wirejson
from bridgecli.gateway.api.answers import PENDING

#: how long a worker waits for a client that reads nothing before it gives up on it
WRITE_TIMEOUT = 30.0
#: one encoder for every response, as ``json.dumps(response, ensure_ascii=False, default=str)``
_ENCODE = wirejson.text_encoder((", ", ": "), default=str)


class ConnectionState(enum.Enum):
    """Where a client connection is in its life."""

    #: requests are read and served
    OPEN = "open"
    #: no further request is served; dropped once the one in progress ends
    HUNG_UP = "hung up"
    #: a write failed: nothing more reaches the client; dropped once its request ends
    BROKEN = "broken"
    #: closed and forgotten
    DROPPED = "dropped"


#: the moves a connection may make; hanging up or breaking again where already past it stays put
MOVES = {
    ConnectionState.OPEN: {ConnectionState.HUNG_UP, ConnectionState.BROKEN, ConnectionState.DROPPED},
    ConnectionState.HUNG_UP: {ConnectionState.BROKEN, ConnectionState.DROPPED},
    ConnectionState.BROKEN: {ConnectionState.DROPPED},
    ConnectionState.DROPPED: set(),
}


class IllegalConnectionMove(RuntimeError):
    """A move :data:`MOVES` does not allow (serving or dropping a connection already dropped):
    a bug in the local API, never a client's doing."""


def line_of(response: dict[str, Any]) -> bytes:
    """One response as it goes on the wire."""
    return _ENCODE(response).encode() + b"\n"


class EventLoop(Protocol):
    """The part of pika's ``IOLoop`` the local API uses."""

    def add_handler(self, fd: int, handler: Callable[[int, int], None], events: int) -> None: ...

    def update_handler(self, fd: int, events: int) -> None: ...

    def remove_handler(self, fd: int) -> None: ...


def write_all(sock: socket.socket, data: bytes) -> None:
    """Write all of ``data`` on a non-blocking socket from a thread that may wait (OSError
    when the client is gone or reads nothing for :data:`WRITE_TIMEOUT` seconds)."""
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view) :]
        except (BlockingIOError, InterruptedError):
            if not select.select([], [sock], [], WRITE_TIMEOUT)[1]:
                raise TimeoutError("the client reads nothing") from None


class SocketAnswer:
    """The :class:`~bridgecli.gateway.answers.EarlyAnswer` of one request: a non-blocking
    write from the thread that hands over messages. Once all of it went out, ``free`` is
    called (the connection may serve its next request) and the request's worker writes
    nothing more; else the worker writes the rest."""

    def __init__(self, client: Client, free: Callable[[], None]) -> None:
        self._client = client
        self._free = free
        self._rest = b""
        #: all of the answer went out, and ``free`` was called
        self.freed = False

    def answer(self, result: dict[str, Any]) -> bool:
        data = line_of({"ok": True, **result})
        self._client.note(result)  # before the client can confirm what it hands out
        try:
            sent = self._client.send_now(data)
        except OSError:
            self._client.forget(result)
            return False
        self._rest = data[sent:]
        if not self._rest:
            self.freed = True
            self._free()
        return True

    def finish(self) -> None:
        """Write what the socket did not take at once (the request's worker)."""
        rest, self._rest = self._rest, b""
        if rest:
            write_all(self._client.sock, rest)


class Client:
    """A connection's state: where it is in its life (:class:`ConnectionState`, changed by the
    named methods only), its unread input, the request in progress, and the messages it was
    handed and has not confirmed (see :data:`~bridgecli.gateway.api.answers.PENDING`)."""

    def __init__(self, sock: socket.socket, loop: EventLoop) -> None:
        self.sock = sock
        self.loop = loop
        self.inbuf = bytearray()
        #: loop thread: the token of the request in progress (its answer not written yet)
        self.request: object | None = None
        #: where it is in its life; moved by :meth:`hang_up`, :meth:`mark_broken` and :meth:`close`
        self.state = ConnectionState.OPEN
        #: loop thread: the client sent all it will send (a half-close); what came before is
        #: still answered
        self.input_ended = False
        #: loop thread: the rest of the last response, waiting for room in the socket
        self.unwritten = b""
        self._handler: Callable[[int, int], None] | None = None
        #: the events the loop watches the socket for (0: not watched)
        self._watched = 0
        self._lock = threading.Lock()
        self._pending: set[str] = set()

    def watch(self, handler: Callable[[int, int], None]) -> None:
        """Have the loop call ``handler(fd, events)`` when the socket has input, or room for
        the rest of a response (loop thread)."""
        self._handler = handler
        self._watch()

    def end_input(self) -> None:
        """The client sent all it will send (loop thread): stop watching for input, which
        would be the end of input again at every turn of the loop."""
        self.input_ended = True
        self._watch()

    def _watch(self) -> None:
        events = (0 if self.input_ended else READ) | (WRITE if self.unwritten else 0)
        if events == self._watched or self._handler is None:
            return
        fd = self.sock.fileno()
        if not events:
            self.loop.remove_handler(fd)
        elif not self._watched:
            self.loop.add_handler(fd, self._handler, events)
        else:
            self.loop.update_handler(fd, events)
        self._watched = events

    @property
    def busy(self) -> bool:
        """A request is in progress (loop thread)."""
        return self.request is not None

    @property
    def serving(self) -> bool:
        """Its requests are still read and served (loop thread)."""
        return self.state is ConnectionState.OPEN

    def _move(self, to: ConnectionState) -> None:
        with self._lock:
            if to not in MOVES[self.state]:
                raise IllegalConnectionMove(f"a {self.state.value} connection cannot become {to.value}")
            self.state = to

    def hang_up(self) -> None:
        """Serve no further request (loop thread); a connection already hung up or broken stays."""
        if self.state is not ConnectionState.HUNG_UP and self.state is not ConnectionState.BROKEN:
            self._move(ConnectionState.HUNG_UP)

    def mark_broken(self) -> None:
        """A write failed (any thread); a connection already broken stays."""
        if self.state is not ConnectionState.BROKEN:
            self._move(ConnectionState.BROKEN)

    def note(self, response: dict[str, Any]) -> None:
        """Keep track of what ``response`` hands out to be confirmed, or confirms."""
        with self._lock:
            self._pending.update(response.get(PENDING) or ())
            self._pending.difference_update(response.get("confirmedIds") or ())

    def forget(self, response: dict[str, Any]) -> None:
        """Undo :meth:`note` for a response that could not be written."""
        with self._lock:
            self._pending.difference_update(response.get(PENDING) or ())

    def take_pending(self) -> set[str]:
        with self._lock:
            pending, self._pending = self._pending, set()
        return pending

    def send_now(self, data: bytes) -> int:
        """How much of ``data`` the socket took at once, without blocking (any thread);
        OSError when the client is gone."""
        try:
            return self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            return 0

    def write(self, data: bytes) -> bool:
        """Write without blocking (loop thread); the rest goes when the socket is writable.
        False when the client is gone."""
        try:
            sent = self.send_now(data)
        except OSError:
            return False
        self.unwritten = data[sent:]
        if self.unwritten:
            self._watch()
        return True

    def write_more(self) -> None:
        """The socket is writable again: write more of the rest (loop thread)."""
        if self.unwritten and not self.write(self.unwritten):
            self.unwritten = b""
            self.mark_broken()
        if not self.unwritten:
            self._watch()

    def write_all(self, data: bytes) -> None:
        """Write all of ``data`` from a worker (OSError when the client is gone)."""
        write_all(self.sock, data)

    def close(self) -> None:
        """Stop watching the socket and close it (loop thread): the connection is dropped."""
        self._move(ConnectionState.DROPPED)
        if self._watched:
            self._watched = 0
            try:
                self.loop.remove_handler(self.sock.fileno())
            except (KeyError, ValueError, OSError):  # already removed with its closed socket
                pass
        self.sock.close()


READ, WRITE = select.POLLIN, select.POLLOUT  # pika's IOLoop.READ / WRITE
