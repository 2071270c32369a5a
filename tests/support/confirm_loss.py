"""A TCP proxy to the broker that loses one publisher confirm, the real way: by cutting the line.

``ConfirmLossProxy(broker_uri)`` listens on a free loopback port (:attr:`uri`) and forwards
every AMQP connection to the broker unchanged, reading the frames as they pass. The first
``basic.publish`` to ``bridge.msg`` it sees (the proxy is then spent) goes on to the broker,
but from that instant nothing more reaches the client on that connection: the proxy waits for
the broker's ``basic.ack`` of that channel (the broker has the message), drops it, and cuts
both sides. The client thus sees its connection die with the publish unconfirmed, although
the message was delivered — exactly the ambiguous failure a retry must not turn into two.
"""

from __future__ import annotations

import socket
import struct
import threading
from urllib.parse import urlsplit, urlunsplit

#: AMQP 0-9-1 frame types and the methods the proxy looks for: (class id, method id)
_METHOD_FRAME = 1
_BASIC_PUBLISH = (60, 40)
_BASIC_ACK = (60, 80)
#: how long a cut waits for the broker's ack at most (the cut happens anyway then)
ACK_WAIT = 10.0


class _Frames:
    """Splits a byte stream into whole AMQP frames (after an optional protocol header)."""

    def __init__(self, header: int = 0) -> None:
        self.buffer = b""
        self.header = header

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        frames = []
        if self.header:
            if len(self.buffer) < self.header:
                return frames
            frames.append(self.buffer[: self.header])
            self.buffer, self.header = self.buffer[self.header :], 0
        while len(self.buffer) >= 7:
            size = struct.unpack(">I", self.buffer[3:7])[0]
            if len(self.buffer) < 8 + size:
                break
            frames.append(self.buffer[: 8 + size])
            self.buffer = self.buffer[8 + size :]
        return frames


def _method(frame: bytes) -> tuple[int, tuple[int, int], bytes] | None:
    """``(channel, (class, method), arguments)`` of a method frame; None for any other."""
    if len(frame) < 11 or frame[0] != _METHOD_FRAME:
        return None
    channel = struct.unpack(">H", frame[1:3])[0]
    ids = struct.unpack(">HH", frame[7:11])
    return channel, ids, frame[11:-1]


def _exchange_of_publish(arguments: bytes) -> str:
    """The exchange a ``basic.publish``'s arguments name (after its reserved short)."""
    length = arguments[2]
    return arguments[3 : 3 + length].decode()


class _Link:
    """One client connection and its broker connection."""

    def __init__(self, proxy: ConfirmLossProxy, client: socket.socket, broker: socket.socket) -> None:
        self.proxy, self.client, self.broker = proxy, client, broker
        self.cut_channel: int | None = None  #: set: nothing more goes to the client
        self.done = threading.Event()

    def run(self) -> None:
        threading.Thread(target=self._upstream, daemon=True).start()
        threading.Thread(target=self._downstream, daemon=True).start()

    def _upstream(self) -> None:
        frames = _Frames(header=8)
        try:
            while data := self.client.recv(65536):
                for frame in frames.feed(data):
                    method = _method(frame)
                    if method is not None and method[1] == _BASIC_PUBLISH:
                        if _exchange_of_publish(method[2]) == self.proxy.exchange and self.proxy.take_shot():
                            self.cut_channel = method[0]
                            threading.Timer(ACK_WAIT, self.cut).start()
                    self.broker.sendall(frame)
        except OSError:
            pass
        self.cut()

    def _downstream(self) -> None:
        frames = _Frames()
        try:
            while data := self.broker.recv(65536):
                for frame in frames.feed(data):
                    if self.cut_channel is None:
                        self.client.sendall(frame)
                        continue
                    method = _method(frame)
                    if method is not None and method[:2] == (self.cut_channel, _BASIC_ACK):
                        self.proxy.confirms_lost += 1
                        self.cut()
                        return
        except OSError:
            pass
        self.cut()

    def cut(self) -> None:
        if self.done.is_set():
            return
        self.done.set()
        for sock in (self.client, self.broker):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class ConfirmLossProxy:
    """The proxy (see the module): :attr:`uri` to connect through, :attr:`confirms_lost`
    counts the confirms it dropped (at most 1). A context manager; :meth:`close` stops it."""

    def __init__(self, broker_uri: str, exchange: str = "bridge.msg") -> None:
        parts = urlsplit(broker_uri)
        self._broker = (parts.hostname or "127.0.0.1", parts.port or 5672)
        self.exchange = exchange
        self.confirms_lost = 0
        self._shots = 1
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        netloc = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        self.uri = urlunsplit((parts.scheme, f"{netloc}127.0.0.1:{port}", parts.path, parts.query, ""))
        self._links: list[_Link] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def take_shot(self) -> bool:
        """True once: the publish that sees it is the one whose confirm is lost."""
        with self._lock:
            if self._shots <= 0:
                return False
            self._shots -= 1
            return True

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            broker = socket.create_connection(self._broker)
            link = _Link(self, client, broker)
            self._links.append(link)
            link.run()

    def close(self) -> None:
        self._listener.close()
        for link in self._links:
            link.cut()

    def __enter__(self) -> ConfirmLossProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
