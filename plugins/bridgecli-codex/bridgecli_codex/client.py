"""A JSON-RPC client for ``codex app-server`` and the ``codex:`` address it is reached by.

``codex app-server --listen unix://PATH`` speaks WebSocket on that unix socket (an HTTP
upgrade, then one JSON-RPC message per text frame, without ``"jsonrpc": "2.0"``), exactly
like ``--listen ws://IP:PORT`` does on TCP; codex puts the real socket in a private dir of
its own and leaves a symlink at PATH. Each :class:`AppServer` is one short connection:
bridge never holds one open, so a restarted server or a gone one costs nothing to notice.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect, unix_connect

from bridgecli import __version__ as bridge_version
from bridgecli.errors import ConfigError

#: websockets 17 warns unless told that the connection is used outside a ``with`` block
_LEGACY: dict[str, Any] = {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}
#: a thread id as codex mints them (UUIDv7) or a session name: no whitespace, no "#"
THREAD_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
WS_RE = re.compile(r"^wss?://[^\s/#?]+(:\d+)?/?$")
ADDRESS_HINT = "use --deliver codex:unix:/abs/path/to/socket#THREAD_ID (or codex:ws://127.0.0.1:PORT#THREAD_ID)"


@dataclass(frozen=True)
class Endpoint:
    """Where an app-server listens: a unix socket ``path`` or a ``ws://`` url."""

    kind: str  # unix | ws
    target: str

    @property
    def url(self) -> str:
        """The form ``codex app-server --listen`` and ``codex --remote`` take."""
        return f"unix://{self.target}" if self.kind == "unix" else self.target

    def __str__(self) -> str:
        return f"unix:{self.target}" if self.kind == "unix" else self.target


@dataclass(frozen=True)
class Address:
    """The ``ADDRESS`` of ``--deliver codex:ADDRESS``: an endpoint and a thread on it."""

    endpoint: Endpoint
    thread_id: str

    def __str__(self) -> str:
        return f"{self.endpoint}#{self.thread_id}"


def parse_endpoint(text: str) -> Endpoint:
    """``unix:/abs/path`` (``unix:///abs/path`` too) or ``ws[s]://host:port``; ConfigError else."""
    if text.startswith("unix:"):
        path = text[len("unix:") :]
        if path.startswith("///"):
            path = path[2:]
        if not path.startswith("/") or path.startswith("//") or "\x00" in path:
            raise ConfigError(f"codex socket {path!r} is not an absolute path", ADDRESS_HINT)
        return Endpoint("unix", path)
    if WS_RE.match(text):
        return Endpoint("ws", text.rstrip("/"))
    raise ConfigError(f"codex endpoint {text!r} is neither unix:/PATH nor ws://HOST:PORT", ADDRESS_HINT)


def parse_address(address: str | None) -> Address:
    """The :class:`Address` in ``address``; ConfigError naming the form when it is wrong."""
    if not address or "#" not in address:
        raise ConfigError(f"codex address {address!r} names no thread", ADDRESS_HINT)
    endpoint, thread_id = address.rsplit("#", 1)
    if not THREAD_RE.match(thread_id):
        raise ConfigError(f"codex thread id {thread_id!r} is not a thread id", ADDRESS_HINT)
    return Address(parse_endpoint(endpoint), thread_id)


class Unreachable(Exception):
    """No app-server answers at the endpoint (gone, refused, not codex); ``str()`` says why."""


class RpcTimeout(Exception):
    """The app-server did not answer a request in time."""


class RpcError(Exception):
    """The app-server answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method}: {message} (code {code})")
        self.method, self.code, self.message = method, code, message


class AppServer:
    """One initialized connection to an app-server; use as a context manager.

    :meth:`call` returns a request's ``result`` and skips the notifications the server
    broadcasts meanwhile (thread status changes, warnings); requests the server sends to
    clients (approvals) are left to the clients that subscribed to the thread, such as a TUI.
    """

    def __init__(self, endpoint: Endpoint, timeout: float) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._next = 0
        self.ws = self._open()
        try:
            self.call("initialize", {"clientInfo": {"name": "bridgecli", "title": "bridge", "version": bridge_version}})
            self.notify("initialized", {})
        except BaseException:
            self.close()
            raise

    def _open(self) -> ClientConnection:
        options: dict[str, Any] = {
            "open_timeout": self.timeout,
            "close_timeout": 1,
            "compression": None,
            "max_size": None,
            "user_agent_header": None,
            **_LEGACY,
        }
        try:
            if self.endpoint.kind == "unix":
                if not os.path.exists(self.endpoint.target):
                    raise Unreachable(f"no socket at {self.endpoint.target}")
                # the symlink codex leaves may be longer than a socket address may be; its target is short
                path = os.path.realpath(self.endpoint.target)
                return unix_connect(path, uri="ws://localhost/", **options)
            return connect(self.endpoint.target, proxy=None, **options)
        except InvalidStatus as exc:
            raise Unreachable(f"{self.endpoint} refused the connection (HTTP {exc.response.status_code})") from None
        except (OSError, TimeoutError, WebSocketException) as exc:
            detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise Unreachable(f"cannot connect to {self.endpoint} ({detail})") from None

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification (no answer)."""
        self._send({"method": method, "params": params})

    def call(self, method: str, params: dict[str, Any], timeout: float | None = None) -> Any:
        """Send a request and return its result; raise :class:`RpcError`, :class:`RpcTimeout`
        or :class:`Unreachable`."""
        self._next += 1
        request_id = self._next
        self._send({"id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RpcTimeout(f"{self.endpoint} did not answer {method} within {self.timeout:g}s")
            try:
                raw = self.ws.recv(timeout=left)
            except TimeoutError:
                continue
            except ConnectionClosed:
                raise Unreachable(f"{self.endpoint} closed the connection during {method}") from None
            message = json.loads(raw)
            if message.get("id") != request_id or "method" in message:
                continue  # a notification, or a request for clients
            if "error" in message:
                error = message["error"] or {}
                raise RpcError(method, int(error.get("code", 0)), str(error.get("message", "")))
            return message.get("result")

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self.ws.send(json.dumps(message))
        except (ConnectionClosed, OSError) as exc:
            raise Unreachable(f"{self.endpoint} closed the connection ({type(exc).__name__})") from None

    def close(self) -> None:
        """Close the connection (the server keeps its threads running)."""
        self.ws.close()

    def __enter__(self) -> AppServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
