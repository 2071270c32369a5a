"""A small client for OpenCode's HTTP server (``opencode serve``), standard library only.

An address is ``http://HOST:PORT#SESSION_ID`` (:func:`parse_address`). Every request sends
basic auth when a password is known (the server checks ``OPENCODE_SERVER_PASSWORD``). What
a request can end in is one of three exceptions: :class:`ServerGone` (nothing answers),
:class:`ServerTimeout` (no answer in time) or :class:`Refused` (a non-2xx status).
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import secrets
import string
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from bridgecli.errors import ConfigError

#: the default basic-auth user of ``opencode serve`` (``OPENCODE_SERVER_USERNAME`` overrides it)
DEFAULT_USERNAME = "opencode"
#: an OpenCode session id as its API checks it (``^ses``), kept to URL-safe characters
SESSION_RE = re.compile(r"^ses_?[A-Za-z0-9]{1,64}$")
ADDRESS_HINT = "use --deliver opencode:http://127.0.0.1:PORT#ses_… (the URL of `opencode serve` and a session id)"
_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
_id_lock = threading.Lock()
_last_ms = 0
_counter = 0


@dataclass(frozen=True)
class Address:
    """Where a session lives: the server's base URL (scheme, host, port) and the session id."""

    scheme: str
    host: str
    port: int
    session: str

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.url}#{self.session}"


def parse_address(address: str | None) -> Address:
    """``http(s)://HOST:PORT#SESSION`` as an :class:`Address`; ConfigError naming the fix
    otherwise. The port is required: ``opencode serve`` picks a random one by default."""
    if not address:
        raise ConfigError("an opencode address needs the server URL and a session id", ADDRESS_HINT)
    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"opencode address {address!r} is not a URL ({exc})", ADDRESS_HINT) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        raise ConfigError(f"opencode address {address!r} needs http://HOST:PORT", ADDRESS_HINT)
    if parts.username or parts.password or parts.path not in ("", "/") or parts.query:
        raise ConfigError(
            f"opencode address {address!r} may hold only scheme, host, port and #session",
            ADDRESS_HINT + "; the password goes in a file, never in the address",
        )
    if not SESSION_RE.match(parts.fragment):
        raise ConfigError(f"opencode address {address!r} does not end in #ses_… (a session id)", ADDRESS_HINT)
    return Address(parts.scheme, parts.hostname, port, parts.fragment)


def new_message_id(now_ms: int | None = None) -> str:
    """A fresh message id in OpenCode's own form (``msg_`` + 12 hex of the millisecond clock
    times 4096 plus a counter, low 48 bits + 14 base62), so it sorts after every message
    stored before: OpenCode orders a session's messages by id and answers only a user
    message newer than its last finished reply."""
    global _last_ms, _counter
    with _id_lock:
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        if ms != _last_ms:
            _last_ms, _counter = ms, 0
        _counter += 1
        value = (ms * 0x1000 + _counter) & (2**48 - 1)
    return "msg_" + value.to_bytes(6, "big").hex() + "".join(secrets.choice(_BASE62) for _ in range(14))


class ServerError(Exception):
    """A request to the OpenCode server failed; ``detail`` is one line for a user."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ServerGone(ServerError):
    """Nothing accepts connections at the address (server stopped, wrong port)."""


class ServerTimeout(ServerError):
    """The server accepted the connection but did not answer in time."""


class Refused(ServerError):
    """The server answered with a non-2xx status; ``status`` is it, ``name`` OpenCode's
    error name (``NotFoundError``) when the body had one."""

    def __init__(self, detail: str, status: int, name: str = "") -> None:
        super().__init__(detail)
        self.status = status
        self.name = name


class Client:
    """JSON requests to one OpenCode server. One connection per request: loopback connects
    cost well under a millisecond, and a fresh socket never meets a server-closed keep-alive."""

    def __init__(self, address: Address, password: str | None, username: str = DEFAULT_USERNAME) -> None:
        self.address = address
        token = base64.b64encode(f"{username}:{password}".encode()).decode() if password else None
        self._auth = f"Basic {token}" if token else None

    def request(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> tuple[int, Any]:
        """Send one request; return (status, decoded JSON body or None) for a 2xx answer,
        raise :class:`ServerGone`, :class:`ServerTimeout` or :class:`Refused` otherwise."""
        addr = self.address
        cls = http.client.HTTPSConnection if addr.scheme == "https" else http.client.HTTPConnection
        conn = cls(addr.host, addr.port, timeout=timeout)
        headers = {"Accept": "application/json"}
        if self._auth:
            headers["Authorization"] = self._auth
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        where = f"{method} {addr.url}{path}"
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except TimeoutError:
            raise ServerTimeout(f"{where} got no answer within {timeout:g}s") from None
        except (ConnectionRefusedError, ConnectionResetError, http.client.RemoteDisconnected) as exc:
            raise ServerGone(f"nothing answers at {addr.url} ({exc.__class__.__name__})") from None
        except OSError as exc:
            raise ServerGone(f"cannot reach {addr.url} ({exc})") from None
        finally:
            conn.close()
        decoded = _decode(raw)
        if 200 <= response.status < 300:
            return response.status, decoded
        name, message = _error_of(decoded, raw)
        raise Refused(f"{where} answered {response.status} {name or response.reason}: {message}", response.status, name)

    def path(self, template: str, **ids: str) -> str:
        """``template`` with each ``{name}`` replaced by its URL-quoted id."""
        return template.format(**{key: quote(value, safe="") for key, value in ids.items()})


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _error_of(decoded: Any, raw: bytes) -> tuple[str, str]:
    """OpenCode's error name and message from an error body (``{"name", "data": {"message"}}``)."""
    if isinstance(decoded, dict):
        data = decoded.get("data")
        message = data.get("message") if isinstance(data, dict) else None
        return str(decoded.get("name") or ""), " ".join(str(message or decoded)[:300].split())
    return "", " ".join(raw[:300].decode("utf-8", "replace").split()) or "(no body)"
