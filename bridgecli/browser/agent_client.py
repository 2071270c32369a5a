"""The guest agent's client: one WebSocket to the broker as role ``agent``.

:meth:`AgentClient.request` sends a command and blocks for *its* result (ids minted here,
results matched by id in a reader thread), so threads can share one client; a timeout or an
``abort`` event abandons a command, and its late result is dropped. When the socket drops,
every waiting request fails at once (``not_connected``) and the caller (:mod:`.connect`)
decides whether to re-elect. :func:`connect_with_backoff` reconnects with jittered backoff, so
guests do not reconnect in lock-step. No Origin header is sent, as the broker expects of
local agents.
"""

from __future__ import annotations

import inspect
import itertools
import threading
from collections.abc import Callable
from typing import Any

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential, wait_random
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from bridgecli.browser import frames as F
from bridgecli.errors import BrowserError, PermissionProblem
from bridgecli.private_apis.websockets_events import DispatchingClientConnection

#: websockets >= 17 warns unless a direct (non-iterator) connection is asked for explicitly;
#: older releases have no such parameter.
_LEGACY: dict[str, Any] = {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}

#: Close codes after which reconnecting cannot help.
FATAL_CLOSES = {F.CLOSE_BAD_TOKEN, F.CLOSE_BAD_HELLO, F.CLOSE_BAD_VERSION}


class NotConnected(BrowserError):
    """No broker answered at the URL (refused, reset, or not a bridge)."""


#: makes "first resolve wins" atomic across all waiters (held for two attribute accesses)
_RESOLVING = threading.Lock()


class Waiter:
    """One request's answer slot: the first :meth:`resolve` wins and wakes the caller.

    A bare lock held until resolved, not a :class:`threading.Event`: building an Event (a
    Condition and two locks) per command cost more than the broker's routing of it."""

    __slots__ = ("_done", "frame")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()
        self.frame: dict[str, Any] | None = None

    def resolve(self, frame: dict[str, Any]) -> None:
        with _RESOLVING:
            if self.frame is not None:
                return  # e.g. "connection lost" racing a result that just came in
            self.frame = frame
        self._done.release()

    def wait(self, timeout: float) -> bool:
        """Whether the answer is in (waiting up to ``timeout`` seconds)."""
        if self._done.acquire(timeout=max(timeout, 0.0)):
            self._done.release()  # stays resolved for any later wait
            return True
        return False


def await_result(waiter: Waiter, timeout: float, abort: threading.Event | None, action: str) -> dict[str, Any]:
    """Block until ``waiter`` has its result frame; raise ``timeout``/``aborted`` errors.

    Shared by the WebSocket client and the host's in-process agent so both behave the same.
    Without ``abort`` this is a single lock wait (no polling on the fast path).
    """
    if abort is None:
        if not waiter.wait(timeout):
            raise F.CommandError(F.E_TIMEOUT, f"no answer to {action!r} within {timeout:g} s")
    else:
        remaining = timeout
        while not waiter.wait(min(0.05, max(remaining, 0.0))):
            remaining -= 0.05
            if abort.is_set():
                raise F.CommandError(F.E_ABORTED, f"{action!r} aborted by the caller")
            if remaining <= 0:
                raise F.CommandError(F.E_TIMEOUT, f"no answer to {action!r} within {timeout:g} s")
    assert waiter.frame is not None
    return waiter.frame


def result_data(frame: dict[str, Any]) -> Any:
    """``data`` of an ok result, else raise its error as :class:`F.CommandError`."""
    if frame.get("ok"):
        return frame.get("data")
    error = frame.get("error") or {}
    raise F.CommandError(str(error.get("code") or F.E_EXECUTOR), str(error.get("message") or "command failed"))


class AgentClient:
    """A connected agent. Create with :meth:`open`; use :meth:`request`; :meth:`close` it."""

    def __init__(
        self,
        ws: ClientConnection,
        client_id: str,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        on_close: Callable[[AgentClient], None] | None = None,
    ) -> None:
        self._ws = ws
        self.client_id = client_id
        self._on_event = on_event
        self._on_close = on_close
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiters: dict[int, Waiter] = {}
        self._closed = threading.Event()
        self._reader = threading.Thread(target=self._read, name="bridge-agent-reader", daemon=True)
        self._reader.start()

    @classmethod
    def open(
        cls,
        url: str,
        token: str,
        *,
        label: str | None = None,
        timeout: float = 3.0,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        on_close: Callable[[AgentClient], None] | None = None,
    ) -> AgentClient:
        """Connect, say hello, wait for ready.

        Raises :class:`NotConnected` when nothing (or not a bridge) answers, and
        :class:`PermissionProblem` when the broker refuses the token.
        """
        try:
            ws = connect(
                url,
                open_timeout=timeout,
                close_timeout=1,
                compression=None,
                max_size=F.MAX_FRAME_BYTES,
                proxy=None,
                user_agent_header=None,
                create_connection=DispatchingClientConnection,
                **_LEGACY,
            )
        except (OSError, TimeoutError, WebSocketException) as exc:
            # WebSocketException covers InvalidHandshake and a ConnectionClosed raised when the
            # peer resets mid-handshake (a dying host during failover).
            detail = (
                f"HTTP {exc.response.status_code}"
                if isinstance(exc, InvalidStatus)
                else getattr(exc, "strerror", None) or type(exc).__name__
            )
            raise NotConnected(
                f"no browser broker answers at {url} ({detail})", "start one with `bridge browser serve`"
            ) from None
        try:
            ws.send(F.encode(F.hello(token, F.ROLE_AGENT, label=label)))
            ready = F.decode(ws.recv(timeout=timeout))
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            if code == F.CLOSE_BAD_TOKEN:
                raise PermissionProblem(
                    f"the browser broker at {url} refused our token",
                    "check `bridge token show` against BRIDGE_BROWSER_TOKEN/OCB_TOKEN, or unset them",
                ) from None
            raise NotConnected(
                f"the browser broker at {url} closed the connection (code {code})", "check its log"
            ) from None
        except (TimeoutError, F.FrameError, OSError):
            ws.close()
            raise NotConnected(
                f"{url} did not answer hello like a browser broker",
                "is another program using this port? set browser.port",
            ) from None
        if ready.get("type") != "ready" or not isinstance(ready.get("clientId"), str):
            ws.close()
            raise NotConnected(
                f"{url} answered hello with {ready.get('type')!r}, not ready",
                "is another program using this port? set browser.port",
            )
        return cls(ws, ready["clientId"], on_event, on_close)

    @property
    def connected(self) -> bool:
        return not self._closed.is_set()

    def request(
        self,
        action: str,
        group: str | None = None,
        params: dict[str, Any] | None = None,
        *,
        target: str | None = None,
        timeout: float = 60.0,
        abort: threading.Event | None = None,
    ) -> Any:
        """Send one command and return its result's ``data``; raise :class:`F.CommandError`
        on ``ok: false``, timeout (``timeout``), abort (``aborted``) or a lost connection
        (``not_connected``)."""
        req_id = next(self._ids)
        waiter = Waiter()
        with self._lock:
            if self._closed.is_set():
                raise F.CommandError(F.E_NOT_CONNECTED, "not connected to the browser broker")
            self._waiters[req_id] = waiter
        try:
            try:
                self._ws.send(F.encode(F.command(req_id, action, group, params, target)))
            except ConnectionClosed:
                raise F.CommandError(F.E_NOT_CONNECTED, "lost the browser broker") from None
            frame = await_result(waiter, timeout, abort, action)
        finally:
            with self._lock:
                self._waiters.pop(req_id, None)
        return result_data(frame)

    def _read(self) -> None:
        """Frames arrive through :meth:`_on_frame`: on websockets' reading thread once the fast
        path is on, here for frames that were queued (or fragmented). Ends when the socket does."""
        try:
            if isinstance(self._ws, DispatchingClientConnection):
                self._ws.enable_dispatch(self._on_frame)
            while True:
                self._on_frame(self._ws.recv())
        except (ConnectionClosed, OSError):
            pass
        finally:
            self._fail_all()

    def _on_frame(self, raw: str | bytes) -> None:
        try:
            frame = F.decode(raw)
        except F.FrameError:
            return  # a broken frame from the broker must not kill the reader
        kind = frame.get("type")
        if kind in ("result", "error") and isinstance(frame.get("id"), int):
            with self._lock:
                waiter = self._waiters.get(frame["id"])
            if waiter is not None:
                if kind == "error":
                    frame = dict(frame, ok=False)
                waiter.resolve(frame)
        elif kind == "ping":
            try:
                self._ws.send(F.encode(F.PONG))
            except ConnectionClosed:
                pass
        elif kind == "event" and self._on_event is not None:
            try:
                self._on_event(frame)
            except Exception:  # noqa: BLE001 - a caller's callback must not stop the reader
                pass

    def _fail_all(self) -> None:
        with self._lock:
            self._closed.set()
            waiters, self._waiters = list(self._waiters.values()), {}
        for waiter in waiters:
            waiter.resolve(F.fail(None, F.E_NOT_CONNECTED, "lost the browser broker"))
        if self._on_close is not None:
            self._on_close(self)

    def close(self) -> None:
        """Close the socket; waiting requests fail with ``not_connected``."""
        self._ws.close()
        self._reader.join(timeout=2)


def connect_with_backoff(
    url: str,
    token: str,
    *,
    label: str | None = None,
    give_up_after: float = 10.0,
    initial: float = 0.05,
    cap: float = 1.0,
    before_attempt: Callable[[], Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Reconnect loop: call ``before_attempt`` (it may return a non-``None`` value to end the
    loop, e.g. "I won the election") then try :meth:`AgentClient.open`, waiting a jittered,
    capped exponential delay between attempts. Only :class:`NotConnected` is retried; a
    refused token is final."""

    def attempt() -> Any:
        if before_attempt is not None:
            outcome = before_attempt()
            if outcome is not None:
                return outcome
        return AgentClient.open(url, token, label=label, **kwargs)

    # exponential from ``initial`` capped at ``cap``, plus up to ``initial`` of random jitter
    # (spelled with APIs that exist in every tenacity >= 8.2)
    retrying = Retrying(
        wait=wait_exponential(multiplier=initial, max=cap) + wait_random(0, initial),
        stop=stop_after_delay(give_up_after),
        retry=retry_if_exception(lambda exc: isinstance(exc, NotConnected)),
        reraise=True,
    )
    return retrying(attempt)
