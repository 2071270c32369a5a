"""The WebSocket transport around :class:`~bridgecli.browser.broker.Broker`.

Policy, in the order a connection meets it (``docs/browser-protocol.md``): bound to 127.0.0.1
only (the bind is the election); an ``Origin`` other than a browser extension's gets HTTP 403;
too many connections, close 1013; no hello with the right token within 5 s, close
4001/4002/4003; malformed frames get error frames, then close 4005; a peer whose send blocks
10 s is dropped; a JSON ``ping`` after 15 s of quiet keeps MV3 service workers alive.

Why ``websockets.sync``, the ``recv(timeout=1)`` loop and the fast path:
docs/decisions/browser-transport-on-websockets-sync.md.
"""

from __future__ import annotations

import errno
import hmac
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.exceptions import ConnectionClosed, ConnectionClosedError
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.sync.server import Server, ServerConnection, serve

from bridgecli.browser import frames as F
from bridgecli.browser.broker import Broker
from bridgecli.errors import BrowserError
from bridgecli.private_apis.websockets_events import DispatchingServerConnection

#: Origins allowed to open a connection besides "no Origin at all".
EXTENSION_ORIGINS = ("chrome-extension://", "moz-extension://")
#: Seconds an executor may take on one command before the broker fails it for the agent.
COMMAND_TIMEOUT = 120.0
#: Seconds a send may stay blocked on a peer that does not read (full TCP buffers) before that
#: peer is disconnected; without it one stuck peer would stall the broker's sends to everyone.
SEND_TIMEOUT = 10.0


def bind_loopback(port: int) -> socket.socket:
    """Bind and listen on 127.0.0.1:``port``; this is the election.

    Raises :class:`OSError` with ``errno.EADDRINUSE`` when another process holds the port
    (the caller then becomes a guest). ``SO_REUSEADDR`` is set (as ``create_server`` does on
    POSIX) so a new host can bind while the old host's sockets linger in TIME_WAIT; it does not
    let two processes listen at once.
    """
    return socket.create_server(("127.0.0.1", port), backlog=128)


def is_addr_in_use(exc: OSError) -> bool:
    """Whether a bind failed because the port is taken (→ guest)."""
    return exc.errno == errno.EADDRINUSE


def origin_allowed(origin: str | None) -> bool:
    """No Origin (local programs) or a browser-extension Origin; never a web page or ``null``."""
    return origin is None or origin.startswith(EXTENSION_ORIGINS)


class WsConn:
    """Adapts a websockets connection to the broker's ``Conn``; remembers when it last sent
    so keepalive pings only go to quiet connections.

    A frame is written inline only when that cannot block (the lock is free, nothing is queued,
    the kernel takes every byte at once); otherwise it, or its unwritten tail, goes to a
    per-connection writer thread started on first need, and later frames queue behind it, so
    order holds. Only the writer may block (up to ``send_timeout``), fail and close. Why the
    caller must never block: docs/decisions/browser-writes-never-block-the-caller.md.
    """

    def __init__(self, ws: ServerConnection) -> None:
        self.ws = ws
        self.last_send = time.monotonic()
        self._lock = threading.Lock()
        self._backlog = 0  #: items handed to the writer and not yet written
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._dead: ConnectionClosed | None = None
        self._writer: threading.Thread | None = None
        self._stopped = False
        # the inline write pokes at websockets' Protocol buffer; without it, always queue
        self._inline = (
            isinstance(getattr(ws.protocol, "writes", None), list)
            and hasattr(ws, "protocol_mutex")
            and hasattr(ws, "send_context")
        )

    def send(self, frame: dict[str, Any]) -> None:
        self.send_text(F.encode(frame))

    def send_text(self, text: str) -> None:
        """Send an already encoded frame (the broker forwards some frames without re-encoding)."""
        if self._dead is not None:
            raise self._dead
        self.last_send = time.monotonic()
        with self._lock:
            if self._backlog == 0 and self._inline:
                outcome = self._write_now(text.encode("utf-8"))
                if outcome is _SENT:
                    return
                item: Any = _FLUSH if outcome is _PARTIAL else text
            else:
                item = text
            self._backlog += 1
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, daemon=True, name="bridge-conn-writer")
                self._writer.start()
            self._outbox.put(item)

    def _write_now(self, payload: bytes) -> object:
        """One non-blocking attempt; → ``_SENT``, ``_NOT_SENT`` (queue the frame) or
        ``_PARTIAL`` (the frame is in websockets' buffer, partly written: queue a flush)."""
        ws = self.ws
        if not ws.protocol_mutex.acquire(blocking=False):
            return _NOT_SENT  # its reading thread is busy with it (maybe blocked): do not wait
        try:
            if ws.protocol.state is not State.OPEN or ws.send_in_progress or ws.protocol.writes:
                return _NOT_SENT
            ws.protocol.send_text(payload)
            chunks = ws.protocol.data_to_send()
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            try:
                sent = _write_nonblocking(ws.socket, data)
            except OSError:  # the writer's send meets it again and closes the connection
                sent = 0
            if sent < len(data):
                # put the tail back first in line: websockets writes it before anything else
                ws.protocol.writes.insert(0, data[sent:])
                return _PARTIAL
            return _SENT
        finally:
            ws.protocol_mutex.release()

    def _write_loop(self) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                return
            try:
                if item is _FLUSH:
                    with self.ws.send_context():  # writes what websockets has buffered
                        pass
                else:
                    self.ws.send(item)
            except Exception as exc:  # the peer is gone or stuck: drop what is queued
                self._dead = exc if isinstance(exc, ConnectionClosed) else ConnectionClosedError(None, None)
                return
            with self._lock:
                self._backlog -= 1

    @property
    def backlog(self) -> int:
        """Frames waiting for the writer thread (0 while sends go out inline)."""
        return self._backlog

    def stop(self) -> None:
        """End the writer once the queued frames are out (the connection is being detached)."""
        with self._lock:
            self._stopped = True
            if self._writer is not None:
                self._outbox.put(None)

    def close(self, code: int, reason: str) -> None:
        # close() waits for the peer's closing frame, which that connection's reading thread
        # may be unable to deliver while the broker is flushing frames: never wait here.
        self.stop()
        threading.Thread(target=self.ws.close, args=(code, reason), daemon=True).start()


_SENT, _NOT_SENT, _PARTIAL = object(), object(), object()
#: writer-queue item: "write what websockets holds in its buffer" (a partial inline write's tail)
_FLUSH = object()


def _write_nonblocking(sock: socket.socket, data: bytes) -> int:
    """Write what the kernel takes now; 0 if it would block. With a timeout set, CPython keeps
    the descriptor non-blocking and would *poll* before ``send`` (that is, wait): write to the
    descriptor directly instead."""
    if sock.gettimeout() is None:
        try:
            return sock.send(data, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return 0
    try:
        return os.write(sock.fileno(), data)
    except (BlockingIOError, InterruptedError):
        return 0


class BrokerServer:
    """Serves one :class:`Broker` on an already bound socket, in background threads."""

    def __init__(
        self,
        broker: Broker,
        token: str,
        sock: socket.socket,
        *,
        max_frame: int = F.MAX_FRAME_BYTES,
        max_connections: int = 64,
        keepalive: float = F.KEEPALIVE_SECONDS,
        hello_timeout: float = F.HELLO_TIMEOUT,
        command_timeout: float = COMMAND_TIMEOUT,
        send_timeout: float = SEND_TIMEOUT,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if not token:
            raise BrowserError("the browser broker needs a token", "set one with `bridge token set`")
        self.broker = broker
        self.port = sock.getsockname()[1]
        self._token = token.encode("utf-8")
        self._max_frame = max_frame
        self._slots = threading.BoundedSemaphore(max_connections)
        self._keepalive = keepalive
        self._hello_timeout = hello_timeout
        self._command_timeout = command_timeout
        self._send_timeout = send_timeout
        self._log = log or (lambda text: None)
        self._stopping = threading.Event()
        self._server: Server = serve(
            self._handler,
            sock=sock,
            process_request=self._check_origin,
            max_size=F.MAX_HELLO_BYTES,
            compression=None,
            open_timeout=5,
            close_timeout=2,
            server_header=None,
            create_connection=DispatchingServerConnection,
        )
        self._threads: list[threading.Thread] = []

    def start(self) -> BrokerServer:
        """Start accepting connections and the housekeeping loop; returns self."""
        for target, name in (
            (self._server.serve_forever, "bridge-broker"),
            (self._housekeeping, "bridge-broker-expire"),
        ):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def shutdown(self) -> None:
        """Close the listening socket and every connection (1001: peers re-elect)."""
        self._stopping.set()
        self._server.shutdown()

    # --- handshake and hello -------------------------------------------------------------------

    def _check_origin(self, connection: ServerConnection, request: Request) -> Response | None:
        origin = request.headers.get("Origin")
        if origin_allowed(origin):
            return None
        self._log(f"refused a handshake from Origin {origin!r}")
        return connection.respond(F.HTTP_FORBIDDEN, "web pages may not connect to the browser bridge\n")

    def _read_hello(self, ws: ServerConnection) -> dict[str, Any] | None:
        try:
            raw = ws.recv(timeout=self._hello_timeout)
        except TimeoutError:
            ws.close(F.CLOSE_BAD_HELLO, "no hello in time")
            return None
        except ConnectionClosed:
            return None
        try:
            hello = F.validate_hello(F.decode(raw))
        except F.FrameError as exc:
            ws.close(F.CLOSE_BAD_HELLO, exc.message[:120])
            return None
        if not hmac.compare_digest(hello["token"].encode("utf-8"), self._token):
            self._log("refused a hello with a wrong token")
            ws.close(F.CLOSE_BAD_TOKEN, "bad token")
            return None
        if hello["v"] != F.PROTOCOL_VERSION:
            ws.close(F.CLOSE_BAD_VERSION, f"protocol v{F.PROTOCOL_VERSION} only")
            return None
        return hello

    # --- per-connection loop -------------------------------------------------------------------

    def _handler(self, ws: ServerConnection) -> None:
        if not self._slots.acquire(blocking=False):
            ws.close(F.CLOSE_TRY_LATER, "too many connections")
            return
        try:
            hello = self._read_hello(ws)
            if hello is None or self._stopping.is_set():
                return
            ws.protocol.max_message_size = self._max_frame
            # Reads happen only after select() says the socket is readable, so this bounds
            # sendall() alone (websockets itself sets the timeout only while closing).
            ws.socket.settimeout(self._send_timeout)
            conn = WsConn(ws)
            client_id = self.broker.attach(conn, hello)
            try:
                self._serve(ws, conn, client_id)
            finally:
                self.broker.detach(client_id)
                conn.stop()
        finally:
            self._slots.release()

    def _serve(self, ws: ServerConnection, conn: WsConn, client_id: str) -> None:
        bad = [0]

        def dispatch(raw: str | bytes) -> None:
            try:
                frame = F.decode(raw)
            except F.FrameError as exc:
                bad[0] += 1
                try:
                    conn.send(F.error(exc.code, exc.message))
                except ConnectionClosed:
                    return
                if bad[0] == F.MAX_BAD_FRAMES:
                    # close() waits for the peer's answer, which only the reading thread can
                    # read, and this may *be* the reading thread: close from another thread.
                    threading.Thread(
                        target=ws.close, daemon=True, args=(F.CLOSE_PROTOCOL, "too many malformed frames")
                    ).start()
                return
            if bad[0] < F.MAX_BAD_FRAMES:
                self.broker.handle(client_id, frame)

        try:
            if isinstance(ws, DispatchingServerConnection):
                ws.enable_dispatch(dispatch)
        except ConnectionClosed:
            return
        while True:
            try:
                raw = ws.recv(timeout=1.0)
            except TimeoutError:
                if ws.protocol.state is not State.OPEN:  # e.g. after a 1009 close
                    ws.close()
                    return
                if time.monotonic() - conn.last_send >= self._keepalive:
                    try:
                        conn.send(F.PING)
                    except ConnectionClosed:
                        return
                continue
            except ConnectionClosed:
                return
            dispatch(raw)

    def _housekeeping(self) -> None:
        while not self._stopping.wait(min(5.0, self._command_timeout / 4)):
            self.broker.expire(self._command_timeout)
