"""The executor side of the broker connection: hello, commands, keepalive, reconnect.

Shaped like kombu's ConsumerMixin: :meth:`ExecutorSession.run` is a reconnect loop with
capped, jittered backoff that ends when ``should_stop`` holds; each connection is served by
:meth:`_serve`. Commands run on a small thread pool so a slow page load in one group never
blocks another group's click, and every reply goes out through one locked send.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import websocket

from bridgecli.browser import frames
from bridgecli.errors import BrowserError
from bridgecli.interfaces import ExecutorOptions

log = logging.getLogger("bridgecli.cdp")

Handler = Callable[[str, str | None, dict[str, Any]], dict[str, Any]]
StatusCallback = Callable[[str, dict[str, Any]], None]

#: A new connection after this long counts as healthy again: the backoff starts over.
HEALTHY_AFTER = 5.0


class Replaced(BrowserError):
    """Another live executor presented our id (close 4004): reconnecting would make the two
    evict each other forever, so this executor stops instead."""


def backoff_delays(first: float = 0.25, cap: float = 5.0):
    """Capped exponential backoff with full jitter (never a reconnect loop without delay)."""
    delay = first
    while True:
        yield random.uniform(delay / 2, delay)
        delay = min(cap, delay * 2)


class ExecutorSession:
    """Keeps one executor connected to the broker and serves its commands."""

    def __init__(
        self,
        options: ExecutorOptions,
        *,
        executor_id: str,
        browser: str,
        handler: Handler,
        should_stop: Callable[[], bool],
        on_status: StatusCallback | None = None,
        workers: int = 8,
    ) -> None:
        self.options = options
        self.executor_id = executor_id
        self.browser = browser
        self.handler = handler
        self.should_stop = should_stop
        self.on_status = on_status or (lambda state, info: None)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cdp-cmd")
        self._ws: websocket.WebSocket | None = None
        self._send_lock = threading.Lock()
        self.client_id: str | None = None

    # --- sending ------------------------------------------------------------------------

    def send(self, frame: dict[str, Any]) -> None:
        """Send one frame if connected; a frame lost to a dead socket is dropped (the broker
        fails the command with ``executor_gone`` and the agent retries)."""
        with self._send_lock:
            ws = self._ws
            if ws is None:
                return
            try:
                ws.send(frames.encode(frame))
            except Exception:  # a dead socket: dropped, as the docstring says
                pass

    def emit(self, event: dict[str, Any]) -> None:
        """Send an event frame (tab/group closed) to the broker."""
        self.send(event)

    def _token(self) -> str:
        """The token for this attempt. ``settings["token_source"]`` (a callable), when given,
        is asked every time, so a token rotated while we run (`bridge token rotate`, a new
        host with another token) is picked up on the next reconnect."""
        source = self.options.settings.get("token_source")
        if source is not None:
            try:
                return source() or self.options.token
            except Exception as exc:  # a broken source must not stop reconnecting
                log.warning("token source failed (%s: %s); using the configured token", type(exc).__name__, exc)
        return self.options.token

    # --- lifecycle ----------------------------------------------------------------------

    def run(self) -> None:
        """Connect, serve, reconnect with backoff; return once ``should_stop()`` is true."""
        delays = backoff_delays()
        try:
            while not self.should_stop():
                started = time.monotonic()
                try:
                    self._serve()
                except Replaced as exc:
                    self.on_status("replaced", {"error": str(exc)})
                    raise
                except BrowserError as exc:
                    self.on_status("refused", {"error": str(exc)})
                    log.warning("%s", exc)
                except Exception as exc:
                    self.on_status("disconnected", {"error": f"{type(exc).__name__}: {exc}"})
                    log.info("broker connection lost: %s", exc)
                if time.monotonic() - started > HEALTHY_AFTER:
                    delays = backoff_delays()
                self._sleep(next(delays))
        finally:
            self.pool.shutdown(wait=False, cancel_futures=True)

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.should_stop() and time.monotonic() < deadline:
            time.sleep(min(0.05, deadline - time.monotonic()))

    def _serve(self) -> None:
        ws = websocket.create_connection(self.options.url, suppress_origin=True, timeout=5, enable_multithread=True)
        try:
            ws.send(
                frames.encode(
                    dict(
                        frames.hello(
                            self._token(),
                            frames.ROLE_EXTENSION,
                            label=self.options.label,
                            id=self.executor_id,
                            browser=self.browser,
                        ),
                        default=bool(self.options.settings.get("default", False)),
                    )
                )
            )
            ready = self._recv_ready(ws)
            self.client_id = ready.get("clientId")
            with self._send_lock:
                self._ws = ws
            self.on_status(
                "connected",
                {
                    "clientId": self.client_id,
                    "id": self.executor_id,
                    "label": self.options.label,
                    "url": self.options.url,
                },
            )
            log.info("executor %s (%s) connected to %s", self.executor_id, self.options.label, self.options.url)
            self._loop(ws)
        finally:
            with self._send_lock:
                self._ws = None
            try:
                ws.close()
            except Exception:  # the socket may already be broken: closed either way
                pass

    def _recv_ready(self, ws: websocket.WebSocket) -> dict[str, Any]:
        opcode, data = ws.recv_data(control_frame=True)
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            code = int.from_bytes(data[:2], "big") if len(data) >= 2 else None
            reason = data[2:].decode("utf-8", "replace")
            if code == frames.CLOSE_BAD_TOKEN:
                raise BrowserError(
                    "the browser broker refused the token", "run `bridge token show` and pass the current token"
                )
            raise ConnectionError(f"broker closed the connection at hello ({code} {reason})")
        frame = frames.decode(data)
        if frame.get("type") != "ready":
            raise BrowserError(
                f"the broker answered hello with {frame.get('type')!r}",
                "update bridge so both sides speak the same protocol",
            )
        return frame

    def _loop(self, ws: websocket.WebSocket) -> None:
        ws.settimeout(0.5)
        last_sent = time.monotonic()
        while not self.should_stop():
            try:
                opcode, raw = ws.recv_data(control_frame=True)
            except websocket.WebSocketTimeoutException:
                # Our own keepalive too: the broker pings after 15 s of silence, but a
                # half-open socket is only noticed when we write to it.
                if time.monotonic() - last_sent > frames.KEEPALIVE_SECONDS:
                    self.send(frames.PING)
                    last_sent = time.monotonic()
                continue
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                code = int.from_bytes(raw[:2], "big") if len(raw) >= 2 else None
                if code == frames.CLOSE_REPLACED:
                    raise Replaced(
                        f"another executor with id {self.executor_id} connected to the broker and replaced this one",
                        "give each browser its own --label (or --id)",
                    )
                raise ConnectionError(f"broker closed the connection ({code})")
            if opcode not in (websocket.ABNF.OPCODE_TEXT, websocket.ABNF.OPCODE_BINARY):
                continue
            try:
                frame = frames.decode(raw)
            except frames.FrameError:
                continue
            kind = frame.get("type")
            if kind == "ping":
                self.send(frames.PONG)
            elif kind == "command":
                self.pool.submit(self._run_command, frame)
        # stopping: say goodbye so the broker marks us gone at once
        try:
            ws.close(status=frames.CLOSE_NORMAL)
        except Exception:  # a goodbye to a dead socket: the broker notices it gone anyway
            pass

    def _run_command(self, frame: dict[str, Any]) -> None:
        frame_id = frame.get("id")
        try:
            data = self.handler(str(frame.get("action", "")), frame.get("group"), dict(frame.get("params") or {}))
            self.send(frames.ok(frame_id, data))
        except BrowserError as exc:
            self.send(frames.fail(frame_id, frames.E_EXECUTOR, str(exc)))
        except Exception as exc:  # an executor must answer every command
            log.exception("action %s failed", frame.get("action"))
            self.send(frames.fail(frame_id, frames.E_EXECUTOR, f"{type(exc).__name__}: {exc}"))
