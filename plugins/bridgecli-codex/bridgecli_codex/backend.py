"""The ``codex`` delivery backend: hand a framed message to a Codex thread as a turn's input.

``--deliver codex:unix:/abs/path/sock#THREAD_ID`` (or ``codex:ws://127.0.0.1:PORT#THREAD_ID``).
``deliver`` sends ``turn/start`` with the frame as text and the message id as
``clientUserMessageId``; on an idle thread that starts a turn, on a busy one codex steers the
running turn with it (the model reads it at its next step; nothing waits for the turn to end).
It returns once the thread's items show the message in that turn: ``Delivered("accepted",
read=True, ref=TURN_ID)``. A gone, refusing or silent server is a retryable DeliveryError.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bridgecli.errors import ConfigError, DeliveryError, NotFound
from bridgecli.framing import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, render
from bridgecli.interfaces import HOW_ACCEPTED, BackendTraits, Delivered
from bridgecli_codex.client import Address, AppServer, RpcError, RpcTimeout, Unreachable, parse_address

if TYPE_CHECKING:
    from bridgecli.envelope import Envelope
    from bridgecli.interfaces import BackendContext, Entity

#: how many of a turn's newest items are searched for the delivered message
CONFIRM_ITEMS = 100


def _number(settings: Mapping[str, Any], key: str, default: float) -> float:
    try:
        value = float(settings.get(key, default))
    except (TypeError, ValueError):
        value = -1.0
    if value < 0:
        raise ConfigError(
            f"[plugins.codex] {key} must be a non-negative number, not {settings.get(key)!r}",
            f"fix {key} in bridge.toml",
        )
    return value


@dataclass(frozen=True)
class CodexSettings:
    """``[plugins.codex]`` keys that shape delivery (the README lists them)."""

    timeout: float = 10.0
    confirm_timeout: float = 10.0
    max_bytes: int = DEFAULT_MAX_BYTES
    max_lines: int = DEFAULT_MAX_LINES

    @classmethod
    def load(cls, settings: Mapping[str, Any]) -> CodexSettings:
        return cls(
            timeout=_number(settings, "timeout", cls.timeout),
            confirm_timeout=_number(settings, "confirm_timeout", cls.confirm_timeout),
            max_bytes=int(_number(settings, "max_inline_bytes", cls.max_bytes)),
            max_lines=int(_number(settings, "max_inline_lines", cls.max_lines)),
        )


@dataclass(frozen=True)
class ThreadState:
    """What :meth:`CodexBackend.describe` reports: a status word and why."""

    status: str
    detail: str


def thread_state(thread: Mapping[str, Any]) -> ThreadState:
    """Map a ``thread/read`` thread to a status: ``working`` (a turn runs), ``blocked`` (it waits
    on an approval or on user input), ``idle``, or ``unknown`` (not loaded, or a system error)."""
    status = thread.get("status") or {}
    kind = status.get("type")
    if kind == "idle":
        return ThreadState("idle", "no turn is running")
    if kind == "active":
        flags = [str(f) for f in status.get("activeFlags") or []]
        if flags:
            return ThreadState("blocked", "a turn waits: " + ", ".join(flags))
        return ThreadState("working", "a turn is running")
    return ThreadState("unknown", f"thread status {kind!r}")


def read_state(address: Address, timeout: float) -> ThreadState:
    """The state of ``address``'s thread from one ``thread/read``: ``gone`` when no server
    answers or it has no such thread."""
    try:
        with AppServer(address.endpoint, timeout) as server:
            result = server.call("thread/read", {"threadId": address.thread_id})
    except Unreachable as exc:
        return ThreadState("gone", str(exc))
    except RpcTimeout as exc:
        return ThreadState("unknown", str(exc))
    except RpcError as exc:
        return ThreadState("gone" if _thread_missing(exc) else "unknown", exc.message)
    return thread_state((result or {}).get("thread") or {})


def _thread_missing(exc: RpcError) -> bool:
    return "not found" in exc.message or "not loaded" in exc.message


class CodexBackend:
    """Delivery backend ``codex`` (see the module docstring)."""

    inline = False  # waits on a server; the gateway runs it off its AMQP thread
    traits = BackendTraits(delivered_how=HOW_ACCEPTED)

    def __init__(self, settings: CodexSettings) -> None:
        self.settings = settings

    @classmethod
    def from_context(cls, context: BackendContext) -> CodexBackend:
        return cls(CodexSettings.load(context.config.plugin_settings("codex")))

    def _open(self, address: Address) -> AppServer:
        return AppServer(address.endpoint, self.settings.timeout)

    # --- DeliveryBackend ------------------------------------------------------------

    def check_address(self, address: str | None) -> None:
        """The address must have the documented form and name a thread the server knows."""
        parsed = parse_address(address)
        try:
            with self._open(parsed) as server:
                server.call("thread/read", {"threadId": parsed.thread_id})
        except (Unreachable, RpcTimeout) as exc:
            raise NotFound(
                f"no codex app-server answers at {parsed.endpoint} ({exc})",
                'start it with `codex app-server --listen unix://PATH`, or spawn one with launcher = "codex"',
            ) from None
        except RpcError as exc:
            raise NotFound(
                f"codex app-server at {parsed.endpoint} has no thread {parsed.thread_id} ({exc.message})",
                "give the id of a thread started on that server (thread/start)",
            ) from None

    def deliver(self, entity: Entity, envelope: Envelope) -> Delivered:
        """Send the framed message as turn input; return once the thread shows it in that turn."""
        try:
            address = parse_address(entity.address)
        except ConfigError as exc:
            raise DeliveryError(
                f"entity {entity.label} has a bad codex address: {exc.message}", exc.hint, retryable=False
            ) from None
        frame = render(envelope, max_bytes=self.settings.max_bytes, max_lines=self.settings.max_lines)
        where = f"codex app-server at {address.endpoint}"
        try:
            with self._open(address) as server:
                turn_id = self._start_turn(server, address, frame.text, envelope.msg_id)
                self._confirm(server, address, turn_id, envelope.msg_id)
        except Unreachable as exc:
            raise DeliveryError(
                f"{where} is gone: {exc}",
                "restart the agent (bridge spawn) and re-register it; the message is retried",
                retryable=True,
            ) from None
        except RpcTimeout as exc:
            raise DeliveryError(
                f"{where} timed out: {exc}", "check the server's log; the message is retried", retryable=True
            ) from None
        return Delivered(how=HOW_ACCEPTED, read=True, ref=turn_id)

    def status(self, entity: Entity) -> str:
        """One of ``gone`` (no server, or no such thread), ``working``, ``blocked``, ``idle``
        or ``unknown``; :meth:`describe` says why."""
        return self.describe(entity).status

    def describe(self, entity: Entity) -> ThreadState:
        """The thread's status word with an explanation, from one ``thread/read``."""
        try:
            address = parse_address(entity.address)
        except ConfigError as exc:
            return ThreadState("gone", exc.message)
        return read_state(address, self.settings.timeout)

    # --- steps ----------------------------------------------------------------------

    def _start_turn(self, server: AppServer, address: Address, text: str, msg_id: str) -> str:
        """``turn/start`` (which steers a running turn); a thread the server has not loaded is
        resumed from its saved history first. Returns the turn's id."""
        params = {
            "threadId": address.thread_id,
            "input": [{"type": "text", "text": text, "text_elements": []}],
            "clientUserMessageId": msg_id,
        }
        try:
            result = server.call("turn/start", params)
        except RpcError as exc:
            if not _thread_missing(exc):
                raise self._refused(address, exc) from None
            try:
                server.call("thread/resume", {"threadId": address.thread_id, "excludeTurns": True})
                result = server.call("turn/start", params)
            except RpcError as again:
                raise DeliveryError(
                    f"codex app-server at {address.endpoint} has no thread {address.thread_id} ({again.message})",
                    "re-register the entity with a thread of that server (or spawn it again)",
                    retryable=False,
                ) from None
        turn = (result or {}).get("turn") or {}
        if not turn.get("id"):
            raise DeliveryError(
                f"codex app-server at {address.endpoint} answered turn/start without a turn id",
                "check the codex version (0.171 or later); the message is retried",
                retryable=True,
            )
        return str(turn["id"])

    def _refused(self, address: Address, exc: RpcError) -> DeliveryError:
        return DeliveryError(
            f"codex app-server at {address.endpoint} refused the message: {exc}",
            "check the thread in the Codex TUI or the server's log; the message is retried",
            retryable=True,
        )

    def _confirm(self, server: AppServer, address: Address, turn_id: str, msg_id: str) -> None:
        """Wait until the turn's items hold the user message with ``clientId`` = ``msg_id``."""
        missing = wait_for_message(server, address, turn_id, msg_id, self.settings.confirm_timeout)
        if missing is not None:
            raise DeliveryError(
                f"codex turn {turn_id} on {address.endpoint} did not show message {msg_id} "
                f"within {self.settings.confirm_timeout:g}s ({missing})",
                "check the thread in the Codex TUI; the message is retried",
                retryable=True,
            )


def wait_for_message(server: AppServer, address: Address, turn_id: str, client_id: str, timeout: float) -> str | None:
    """Poll the turn's newest items until one is the user message ``client_id``: None once it
    is there, else (after ``timeout``) what was seen instead."""
    params = {"threadId": address.thread_id, "turnId": turn_id, "sortDirection": "desc", "limit": CONFIRM_ITEMS}
    deadline = time.monotonic() + timeout
    delay, last = 0.002, "no answer"
    while True:
        try:
            entries = (server.call("thread/items/list", params) or {}).get("data") or []
            if any(_is_message(entry.get("item") or {}, client_id) for entry in entries):
                return None
            last = f"{len(entries)} items, none of them the message"
        except RpcError as exc:  # "not supported yet" until the thread's history is written
            last = exc.message
        if time.monotonic() >= deadline:
            return last
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _is_message(item: Mapping[str, Any], msg_id: str) -> bool:
    return item.get("type") == "userMessage" and item.get("clientId") == msg_id
