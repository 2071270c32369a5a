"""A small client for herdr's local socket API (the facts: README.md#herdr-socket).

The protocol is newline-delimited JSON over a Unix socket with **one request per
connection**: connect, write one ``{"id","method","params"}`` line, read one line, close.
Long waits (``agent.wait``, ``pane.wait_for_output``, ``events.wait``) hold the connection
until they answer. There is no handshake, so the client ``ping``s first and refuses a server
whose protocol it does not know (20 = herdr 0.8.x, 22 = herdr 0.9), as herdr's own CLI does.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bridgecli.errors import BridgeError, ExitCode

#: protocol numbers this client was written against
SUPPORTED_PROTOCOLS = (20, 22)
#: herdr refuses request lines longer than this, JSON escaping included
MAX_REQUEST_BYTES = 1024 * 1024
_ids = itertools.count(1)


class HerdrError(BridgeError):
    """herdr answered with an error object (``code`` is herdr's, e.g. ``pane_not_found``),
    or could not be reached (``code`` is ours: ``server_not_running``, ``protocol_mismatch``,
    ``bad_response``)."""

    exit_code = ExitCode.PLUGIN

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.code = code


def config_dir(env: Mapping[str, str]) -> Path:
    """herdr's config dir: ``$XDG_CONFIG_HOME/herdr`` else ``~/.config/herdr``."""
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "herdr"


def resolve_socket_path(settings: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Path:
    """The API socket, in herdr's own order (``src/session.rs::active_api_socket_path``):

    1. explicit setting — ``[plugins.herdr] socket`` (a path) or ``session`` (a session name);
    2. ``$HERDR_SOCKET_PATH``;
    3. ``$HERDR_SESSION`` (``default`` means the default session);
    4. ``<cfg>/herdr.sock``.
    """
    env = os.environ if env is None else env
    cfg = config_dir(env)

    def for_session(name: str) -> Path:
        return cfg / "herdr.sock" if name == "default" else cfg / "sessions" / name / "herdr.sock"

    if settings.get("socket"):
        return Path(str(settings["socket"])).expanduser()
    if settings.get("session"):
        return for_session(str(settings["session"]))
    if env.get("HERDR_SOCKET_PATH"):
        return Path(env["HERDR_SOCKET_PATH"])
    if env.get("HERDR_SESSION"):
        return for_session(env["HERDR_SESSION"])
    return cfg / "herdr.sock"


class HerdrClient:
    """One herdr server. Thread-safe: every request opens its own connection."""

    def __init__(self, path: Path, *, timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.server: dict[str, Any] | None = None  # the pong, once checked

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], env: Mapping[str, str] | None = None) -> HerdrClient:
        return cls(resolve_socket_path(settings, env), timeout=float(settings.get("timeout", 10.0)))

    def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, wait: float | None = None
    ) -> dict[str, Any]:
        """Send one request and return its ``result``; raise :class:`HerdrError` on an error
        answer. ``wait`` is how long a long-wait method may hold the connection (seconds)."""
        if self.server is None and method != "ping":
            self.ping()
        request_id = f"bridge:{next(_ids)}"
        line = (
            json.dumps(
                {"id": request_id, "method": method, "params": dict(params or {})},
                ensure_ascii=False,
                separators=(",", ":"),
            ).encode("utf-8")
            + b"\n"
        )
        if len(line) > MAX_REQUEST_BYTES:
            raise HerdrError(
                "request_too_large",
                f"a herdr {method} request would be {len(line)} bytes; herdr takes 1 MiB",
                "lower [plugins.herdr] max_inline_bytes",
            )
        reply = self._exchange(line, self.timeout + (wait or 0.0))
        try:
            answer = json.loads(reply)
        except json.JSONDecodeError:
            raise HerdrError(
                "bad_response",
                f"herdr at {self.path} answered {method} with something that is not JSON: {reply[:120]!r}",
                "is that socket really herdr's API socket (not herdr-client.sock)?",
            ) from None
        if not isinstance(answer, dict):
            raise HerdrError("bad_response", f"herdr answered {method} with a JSON {type(answer).__name__}", None)
        if "error" in answer:
            err = answer.get("error") or {}
            raise HerdrError(
                str(err.get("code", "unknown")),
                f"herdr {method}: {err.get('message', 'error')}",
                _hint(str(err.get("code", ""))),
            )
        if answer.get("id") != request_id:
            raise HerdrError(
                "bad_response",
                f"herdr answered request {request_id} with id {answer.get('id')!r}",
                "another program may be listening on that socket",
            )
        result = answer.get("result")
        if not isinstance(result, dict):
            raise HerdrError("bad_response", f"herdr answered {method} without a result object", None)
        return result

    def ping(self) -> dict[str, Any]:
        """``ping`` and check the protocol number; remembered until a connection fails."""
        pong = self.request("ping", {})
        protocol = pong.get("protocol")
        if pong.get("type") != "pong" or protocol not in SUPPORTED_PROTOCOLS:
            raise HerdrError(
                "protocol_mismatch",
                f"herdr {pong.get('version', '?')} at {self.path} speaks protocol {protocol!r}; "
                f"bridge's herdr plugin speaks {' and '.join(map(str, SUPPORTED_PROTOCOLS))}",
                "use herdr 0.8.x or 0.9.x, or upgrade bridgecli-herdr",
            )
        self.server = pong
        return pong

    def _exchange(self, line: bytes, timeout: float) -> bytes:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            try:
                sock.connect(str(self.path))
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                self.server = None
                raise HerdrError(
                    "server_not_running",
                    f"herdr is not running (no server on {self.path}: {exc.strerror})",
                    "start herdr, or point [plugins.herdr] socket / HERDR_SOCKET_PATH at its socket",
                ) from None
            sock.sendall(line)
            chunks: list[bytes] = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if chunk.endswith(b"\n"):
                    break
        except TimeoutError:
            self.server = None
            raise HerdrError(
                "timeout",
                f"herdr at {self.path} did not answer within {timeout:g}s",
                "check that herdr is responsive (herdr status)",
            ) from None
        except OSError as exc:
            self.server = None
            raise HerdrError(
                "server_not_running",
                f"lost the connection to herdr at {self.path}: {exc}",
                "check that herdr is still running",
            ) from None
        finally:
            sock.close()
        data = b"".join(chunks).strip()
        if not data:
            self.server = None
            raise HerdrError(
                "bad_response",
                f"herdr at {self.path} closed the connection without answering",
                "check herdr's log (HERDR_LOG=herdr=debug)",
            )
        return data.split(b"\n", 1)[0]


def _hint(code: str) -> str | None:
    return {
        "pane_not_found": "the pane was closed; re-register the entity with its new pane id",
        "agent_not_found": "no agent runs in that pane",
        "invalid_key": "this is a bug in bridgecli-herdr; please report it",
        "invalid_request": "this herdr may not support that method; check its version (herdr status)",
    }.get(code)
