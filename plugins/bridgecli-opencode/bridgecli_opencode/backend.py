"""The ``opencode`` delivery backend: post a framed message to an OpenCode session over its
HTTP API and confirm OpenCode stored it.

``--deliver opencode:http://127.0.0.1:PORT#ses_…``. The frame (``bridgecli.framing``, with its
``[bridge xxxxxxxx]`` marker) becomes a user message through ``prompt_async`` under a message
id chosen here, then ``GET /session/{id}/message/{messageID}`` is polled until OpenCode has
it; the receipt's ``ref`` is that id. Nothing is typed into a terminal, so no TUI, focus or
paste timing is involved. A gone, refusing or silent server raises ``DeliveryError``.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridgecli.errors import ConfigError, DeliveryError
from bridgecli.framing import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Frame, render
from bridgecli.interfaces import HOW_ACCEPTED, BackendTraits, Delivered
from bridgecli_opencode.client import (
    DEFAULT_USERNAME,
    Address,
    Client,
    Refused,
    ServerError,
    ServerGone,
    ServerTimeout,
    new_message_id,
    parse_address,
)

if TYPE_CHECKING:
    from bridgecli.envelope import Envelope
    from bridgecli.interfaces import BackendContext, Entity

#: how many recent (bridge message -> OpenCode message id) pairs a backend remembers, so a
#: retry finds the message an earlier attempt already stored instead of posting it twice
REMEMBERED = 4096
#: session states of ``GET /session/status`` that mean a turn is running
BUSY_STATES = ("busy", "retry")


def _number(settings: Mapping[str, Any], key: str, default: float) -> float:
    try:
        value = float(settings.get(key, default))
    except (TypeError, ValueError):
        raise ConfigError(
            f"[plugins.opencode] {key} must be a number, not {settings.get(key)!r}", f"fix {key} in bridge.toml"
        ) from None
    if value < 0:
        raise ConfigError(f"[plugins.opencode] {key} must not be negative", f"fix {key} in bridge.toml")
    return value


@dataclass(frozen=True)
class OpenCodeSettings:
    """``[plugins.opencode]`` keys that shape delivery (the README lists them)."""

    confirm_timeout: float = 15.0
    request_timeout: float = 10.0
    status_timeout: float = 2.0
    password_file: str | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    max_lines: int = DEFAULT_MAX_LINES

    @classmethod
    def load(cls, settings: Mapping[str, Any]) -> OpenCodeSettings:
        """Validate the table once, in the factory, with errors that name the key."""
        password_file = settings.get("password_file")
        return cls(
            confirm_timeout=_number(settings, "confirm_timeout", cls.confirm_timeout),
            request_timeout=_number(settings, "request_timeout", cls.request_timeout) or cls.request_timeout,
            status_timeout=_number(settings, "status_timeout", cls.status_timeout) or cls.status_timeout,
            password_file=str(password_file) if password_file else None,
            max_bytes=int(_number(settings, "max_inline_bytes", cls.max_bytes)),
            max_lines=int(_number(settings, "max_inline_lines", cls.max_lines)),
        )


def read_password(path: str) -> str:
    """The password in ``path`` (first line, stripped); DeliveryError when unreadable."""
    try:
        return Path(path).expanduser().read_text().strip()
    except OSError as exc:
        raise DeliveryError(
            f"cannot read the OpenCode password file {path} ({exc.strerror})",
            "fix [plugins.opencode] password_file, or spawn the agent again",
            retryable=False,
        ) from None


class OpenCodeBackend:
    """Delivery backend ``opencode`` (see the module docstring)."""

    inline = False  # waits on HTTP; the gateway runs it off its AMQP thread
    traits = BackendTraits(delivered_how=HOW_ACCEPTED)

    def __init__(self, settings: OpenCodeSettings, env: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.env = os.environ if env is None else env
        self._sent: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_context(cls, context: BackendContext) -> OpenCodeBackend:
        return cls(OpenCodeSettings.load(context.config.plugin_settings("opencode")))

    # --- DeliveryBackend ------------------------------------------------------------

    def check_address(self, address: str | None) -> None:
        """The address must be ``http(s)://HOST:PORT#ses_…``; the server is not asked (it
        may need a password only a spawned entity's launch data holds)."""
        parse_address(address)

    def client_for(self, entity: Entity) -> tuple[Address, Client]:
        """The entity's address and a client with its credentials: the password file named
        in its launch data (a spawned entity), else ``[plugins.opencode] password_file``,
        else ``OPENCODE_SERVER_PASSWORD`` of the gateway's environment."""
        try:
            address = parse_address(entity.address)
        except ConfigError as exc:
            raise DeliveryError(
                f"entity {entity.label}: {exc.message}", exc.hint or "re-register it", retryable=False
            ) from None
        data = entity.launch_data if isinstance(entity.launch_data, Mapping) else {}
        path = data.get("password_file") or self.settings.password_file
        password = read_password(str(path)) if path else self.env.get("OPENCODE_SERVER_PASSWORD")
        username = str(data.get("username") or self.env.get("OPENCODE_SERVER_USERNAME") or DEFAULT_USERNAME)
        return address, Client(address, password or None, username)

    def deliver(self, entity: Entity, envelope: Envelope) -> Delivered:
        """Post the frame as a user message; return once OpenCode has stored it, with its
        message id as the receipt's ``ref``."""
        address, client = self.client_for(entity)
        frame = render(envelope, max_bytes=self.settings.max_bytes, max_lines=self.settings.max_lines)
        earlier = self._earlier(envelope.msg_id, address)
        if earlier and self._stored(client, address, earlier, frame, entity) is not None:
            return Delivered(how=HOW_ACCEPTED, read=True, ref=earlier)
        message_id = new_message_id()
        self._remember(envelope.msg_id, address, message_id)
        body = {"messageID": message_id, "parts": [{"type": "text", "text": frame.text}]}
        path = client.path("/session/{sid}/prompt_async", sid=address.session)
        try:
            client.request("POST", path, body, timeout=self.settings.request_timeout)
        except ServerError as exc:
            raise self._failure(exc, entity, address) from None
        self._confirm(client, address, message_id, frame, entity)
        return Delivered(how=HOW_ACCEPTED, read=True, ref=message_id)

    def status(self, entity: Entity) -> str:
        """``gone`` when nothing answers at the address, ``blocked`` while the session waits
        on a permission or question, ``working`` while it runs a turn, else ``idle``; one
        request (three while busy), each bounded by ``status_timeout``."""
        try:
            address, client = self.client_for(entity)
        except DeliveryError:
            return "unknown"
        timeout = self.settings.status_timeout
        try:
            _, states = client.request("GET", "/session/status", timeout=timeout)
            state = states.get(address.session) if isinstance(states, dict) else None
            if not isinstance(state, dict) or state.get("type") not in BUSY_STATES:
                return "idle"
            for kind in ("/permission", "/question"):
                try:
                    _, pending = client.request("GET", kind, timeout=timeout)
                except Refused:
                    continue  # a server without this list: the session still runs a turn
                if any(isinstance(p, dict) and p.get("sessionID") == address.session for p in pending or []):
                    return "blocked"
            return "working"
        except ServerGone:
            return "gone"
        except ServerError:
            return "unknown"

    # --- helpers --------------------------------------------------------------------

    def _earlier(self, msg_id: str, address: Address) -> str | None:
        with self._lock:
            found = self._sent.get(msg_id)
        return found[1] if found and found[0] == str(address) else None

    def _remember(self, msg_id: str, address: Address, message_id: str) -> None:
        with self._lock:
            self._sent[msg_id] = (str(address), message_id)
            self._sent.move_to_end(msg_id)
            while len(self._sent) > REMEMBERED:
                self._sent.popitem(last=False)

    def _stored(self, client: Client, address: Address, message_id: str, frame: Frame, entity: Entity) -> Any:
        """The stored message ``message_id`` when OpenCode has it, None while it does not."""
        path = client.path("/session/{sid}/message/{mid}", sid=address.session, mid=message_id)
        try:
            _, message = client.request("GET", path, timeout=self.settings.request_timeout)
        except Refused as exc:
            if exc.status == 404 and "Message not found" in exc.detail:
                return None
            raise self._failure(exc, entity, address) from None
        except ServerError as exc:
            raise self._failure(exc, entity, address) from None
        info = message.get("info", {}) if isinstance(message, dict) else {}
        texts = [p.get("text", "") for p in message.get("parts", []) if isinstance(p, dict)] if info else []
        if info.get("role") != "user" or not any(frame.marker in str(text) for text in texts):
            raise DeliveryError(
                f"OpenCode message {message_id} in {address} is not the frame {frame.marker} for {entity.label}",
                "report this: a message id was reused",
                retryable=False,
            )
        return message

    def _confirm(self, client: Client, address: Address, message_id: str, frame: Frame, entity: Entity) -> None:
        """Poll until the message is stored (OpenCode stores it a moment after answering
        ``prompt_async``; seconds for a server's first prompt), up to ``confirm_timeout``."""
        deadline = time.monotonic() + self.settings.confirm_timeout
        delay = 0.005
        while self._stored(client, address, message_id, frame, entity) is None:
            if time.monotonic() >= deadline:
                raise DeliveryError(
                    f"OpenCode at {address.url} took {frame.marker} for {entity.label} but did not store it "
                    f"within {self.settings.confirm_timeout:g}s",
                    "check the server's log; the gateway retries (raise [plugins.opencode] confirm_timeout if slow)",
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _failure(self, exc: ServerError, entity: Entity, address: Address) -> DeliveryError:
        """The DeliveryError for a failed request: a one-line reason and its fix; retryable
        unless retrying cannot help (unknown session, refused password, bad request)."""
        who = f"OpenCode for {entity.label}"
        if isinstance(exc, ServerGone):
            return DeliveryError(
                f"{who}: {exc.detail}; the server is gone",
                f"start it again (bridge spawn, or opencode serve --port {address.port}); the gateway retries",
            )
        if isinstance(exc, ServerTimeout):
            return DeliveryError(
                f"{who}: {exc.detail}", "the server is stuck or overloaded; the gateway retries (request_timeout)"
            )
        assert isinstance(exc, Refused)
        if exc.status == 401:
            return DeliveryError(
                f"{who}: {exc.detail} (wrong or missing password)",
                "set [plugins.opencode] password_file to a file holding the server's OPENCODE_SERVER_PASSWORD, "
                "then bridge dlq retry",
                retryable=False,
            )
        if exc.status == 404:
            return DeliveryError(
                f"{who}: {exc.detail}",
                f"re-register with a session that exists (GET {address.url}/session lists them), or spawn again",
                retryable=False,
            )
        retryable = exc.status >= 500 or exc.status in (408, 429)
        return DeliveryError(
            f"{who}: {exc.detail}",
            "the gateway retries; see the server's log" if retryable else "check the address and the server version",
            retryable=retryable,
        )
