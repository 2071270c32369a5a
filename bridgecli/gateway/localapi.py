"""The gateway's local socket API: the fast path of one-shot commands on this host.

A Unix socket (mode 0600, in the 0700 user runtime dir) speaking newline-delimited JSON —
the protocol is described in :mod:`bridgecli.gateway.client`. Each client connection gets
a thread; anything that touches AMQP is handed to the gateway's I/O thread.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from bridgecli import paths
from bridgecli.errors import BridgeError, Conflict, Rejected
from bridgecli.gateway import log as glog
from bridgecli.gateway import operations
from bridgecli.gateway.client import error_to_wire

logger = logging.getLogger("bridgecli.gateway")
MAX_REQUEST_BYTES = 8 * 1024 * 1024
#: one encoder for every response (``json.dumps`` with options builds a new one per call)
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def _line(response: dict[str, Any]) -> bytes:
    return _ENCODER.encode(response).encode() + b"\n"


class SocketAnswer:
    """One connection's :class:`operations.EarlyAnswer`: a non-blocking write on its socket
    from the thread that hands over messages; the connection's thread writes the rest."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._rest = b""

    def answer(self, result: dict[str, Any]) -> bool:
        data = _line({"ok": True, **result})
        try:
            sent = self._sock.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        except OSError:
            return False
        self._rest = data[sent:]
        return True

    def finish(self, wfile: Any) -> None:
        """Write what the socket did not take at once (the connection's thread)."""
        rest, self._rest = self._rest, b""
        if rest:
            wfile.write(rest)
            wfile.flush()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True


class ApiHost(Protocol):
    """What the socket server needs of the gateway (implemented by ``Gateway``); each
    operation of :data:`operations.OPS` is called with the host as its first argument."""

    def release_taken(self, msg_ids: list[str]) -> None:
        """Hold again messages a client was handed and never confirmed."""


class LocalApi:
    """Binds the socket and dispatches requests to :data:`operations.OPS`."""

    def __init__(self, gateway: ApiHost, path: Path | None = None) -> None:
        self.gateway = gateway
        self.path = path or paths.gateway_socket()
        self.server: _Server | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        paths.ensure_private_dir(self.path.parent)
        if self.path.exists():
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(self.path))
            except OSError:
                self.path.unlink()  # stale socket of a dead gateway
            else:
                raise Conflict(
                    f"a gateway is already running on {self.path}",
                    "stop it first, or give this one other XDG_RUNTIME_DIR / BRIDGE_GATEWAY_SOCKET",
                )
            finally:
                probe.close()
        api = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                api._serve_connection(self.rfile, self.wfile, SocketAnswer(self.request))

        old_umask = os.umask(0o177)
        try:
            self.server = _Server(str(self.path), Handler)
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        self.thread = threading.Thread(target=self.server.serve_forever, name="local-api", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.server is None:
            return  # never bound: the socket file (if any) belongs to someone else
        self.server.shutdown()
        self.server.server_close()
        self.server = None
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def _serve_connection(self, rfile: Any, wfile: Any, early: SocketAnswer) -> None:
        """Answer requests until the client hangs up. Messages handed out for the client to
        confirm (:data:`operations.PENDING`) that it has not confirmed when the connection
        ends — it died, was killed, or the answer could not be written — are held again."""
        pending: set[str] = set()
        try:
            while True:
                try:
                    line = rfile.readline(MAX_REQUEST_BYTES + 1)
                except OSError:
                    return
                if not line:
                    return
                response = self.handle_line(line, early)
                pending.update(response.get(operations.PENDING) or ())
                pending.difference_update(response.get("confirmedIds") or ())
                try:
                    if response.get(operations.ANSWERED):
                        early.finish(wfile)  # the response went out from the thread that handed it over
                    else:
                        wfile.write(_line(response))
                        wfile.flush()
                except OSError:
                    return
        finally:
            if pending:
                self.gateway.release_taken(sorted(pending))

    def handle_line(self, line: bytes, early: operations.EarlyAnswer | None = None) -> dict[str, Any]:
        """One request line → one response dict; never raises. ``early`` goes to the operations
        that may answer from another thread (their response then only says so)."""
        if len(line) > MAX_REQUEST_BYTES:
            return _error(Rejected("request too large", f"keep requests under {MAX_REQUEST_BYTES} bytes"))
        try:
            request = json.loads(line)
            if not isinstance(request, dict) or not isinstance(request.get("op"), str):
                raise ValueError("not an object with an 'op'")
        except (ValueError, UnicodeDecodeError) as exc:
            return _error(Rejected(f"bad request: {exc}", "send one JSON object per line with an 'op' field"))
        op = request.pop("op")
        handler: Callable[..., dict[str, Any]] | None = operations.OPS.get(op)
        if handler is None:
            return _error(
                Rejected(
                    f"unknown operation {op!r}",
                    "the CLI and the gateway may be different versions; restart the gateway",
                )
            )
        if op in operations.ANSWERING:
            request["early"] = early  # never the client's: a field of that name is replaced
        started = time.monotonic()
        try:
            result = handler(self.gateway, **request)
        except BridgeError as exc:
            return _error(exc)
        except TypeError as exc:
            return _error(
                Rejected(
                    f"bad parameters for {op}: {exc}",
                    "check the request fields; after an upgrade of bridge, restart the gateway",
                )
            )
        except Exception as exc:
            glog.event(logger, "local API operation failed", logging.ERROR, op=op, error=f"{type(exc).__name__}: {exc}")
            return _error(BridgeError(f"gateway failed on {op}: {type(exc).__name__}: {exc}", "see the gateway's log"))
        if logger.isEnabledFor(logging.DEBUG):  # the op's own events are logged at INFO already
            glog.event(logger, "api", logging.DEBUG, op=op, ms=round((time.monotonic() - started) * 1000, 1))
        return {"ok": True, **result}


def _error(exc: BridgeError) -> dict[str, Any]:
    return {"ok": False, "error": error_to_wire(exc)}
