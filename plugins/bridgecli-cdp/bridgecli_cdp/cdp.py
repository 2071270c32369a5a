"""A small synchronous Chrome DevTools Protocol client over one browser-level WebSocket.

Why one browser socket with flattened sessions instead of one socket per tab: targets come
and go (open/close), and a single reader thread that routes replies by ``id`` and events by
``sessionId`` means no per-tab socket lifecycle, and events are queued before anyone asks for
them — which is what makes the load wait unable to miss its event (see :meth:`Cdp.waiter`).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import websocket

from bridgecli.errors import BrowserError

log = logging.getLogger("bridgecli.cdp")

Predicate = Callable[[str, dict[str, Any]], bool]


def browser_ws_url(endpoint: str, timeout: float = 3.0) -> str:
    """Resolve ``http://127.0.0.1:PORT`` (or an already ``ws://`` URL) to the browser socket URL."""
    if endpoint.startswith(("ws://", "wss://")):
        return endpoint
    base = endpoint.rstrip("/")
    if not base.startswith(("http://", "https://")):
        base = "http://" + base
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/json/version", timeout=2) as reply:
                return json.load(reply)["webSocketDebuggerUrl"]
        except Exception as exc:  # Chromium may still be starting
            last = exc
            time.sleep(0.1)
    raise BrowserError(
        f"no DevTools endpoint answers at {base}/json/version ({last})",
        "start Chromium with --remote-debugging-port=PORT and pass --cdp http://127.0.0.1:PORT",
    )


class Waiter:
    """Collects events matching a predicate from the moment it is created."""

    def __init__(self, predicate: Predicate) -> None:
        self.predicate = predicate
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.cond = threading.Condition()

    def offer(self, method: str, params: dict[str, Any]) -> None:
        if self.predicate(method, params):
            with self.cond:
                self.events.append((method, params))
                self.cond.notify_all()

    def wait_for(
        self, match: Callable[[tuple[str, dict[str, Any]]], bool], timeout: float
    ) -> tuple[str, dict[str, Any]] | None:
        """The first collected event for which ``match`` holds, or None after ``timeout`` s."""

        def found() -> tuple[str, dict[str, Any]] | None:
            return next((e for e in self.events if match(e)), None)

        with self.cond:
            self.cond.wait_for(lambda: found() is not None, timeout)
            return found()


class Cdp:
    """One browser-level DevTools connection; thread-safe ``call`` from any thread."""

    def __init__(self, ws_url: str, *, timeout: float = 10.0) -> None:
        try:
            # DevTools refuses foreign Origins with 403; sending none is always accepted.
            self.ws = websocket.create_connection(
                ws_url, suppress_origin=True, timeout=timeout, enable_multithread=True
            )
        except Exception as exc:
            raise BrowserError(
                f"cannot open the DevTools socket {ws_url} ({exc})",
                "check that Chromium is running with remote debugging",
            ) from None
        self.ws.settimeout(None)
        self._ids = itertools.count(1)
        self._pending: dict[int, list[Any]] = {}
        self._lock = threading.Lock()
        self._waiters: list[Waiter] = []
        self._listeners: list[Callable[[str, dict[str, Any]], None]] = []
        self.closed = threading.Event()
        self._reader = threading.Thread(target=self._read, name="cdp-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                raw = self.ws.recv()
                if not raw:
                    break
                msg = json.loads(raw)
                if "id" in msg:
                    with self._lock:
                        slot = self._pending.pop(msg["id"], None)
                    if slot is not None:
                        slot[1] = msg
                        slot[0].set()
                    continue
                method, params = msg.get("method", ""), dict(msg.get("params") or {})
                if "sessionId" in msg:
                    params["__session"] = msg["sessionId"]
                with self._lock:
                    waiters, listeners = list(self._waiters), list(self._listeners)
                for waiter in waiters:
                    waiter.offer(method, params)
                for listener in listeners:
                    try:
                        listener(method, params)
                    except Exception:  # one listener's bug must not stop the reader for the others
                        log.exception("CDP event listener failed on %s", method)
        except Exception as exc:  # the socket closed or broke: the session ends (below)
            log.debug("DevTools connection ended: %s: %s", type(exc).__name__, exc)
        finally:
            self.closed.set()
            with self._lock:
                pending, self._pending = self._pending, {}
            for slot in pending.values():
                slot[0].set()

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None, timeout: float = 30.0
    ) -> dict[str, Any]:
        """Send one command and return its ``result``; raise BrowserError on error/timeout."""
        if self.closed.is_set():
            raise BrowserError("the DevTools connection is closed", "the browser has exited; relaunch it")
        msg_id = next(self._ids)
        slot: list[Any] = [threading.Event(), None]
        with self._lock:
            self._pending[msg_id] = slot
        frame: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            frame["sessionId"] = session
        try:
            self.ws.send(json.dumps(frame))
        except Exception:
            with self._lock:
                self._pending.pop(msg_id, None)
            raise BrowserError("the DevTools connection is closed", "the browser has exited; relaunch it") from None
        if not slot[0].wait(timeout):
            with self._lock:
                self._pending.pop(msg_id, None)
            raise BrowserError(
                f"{method} got no answer within {timeout:g} s", "the page may be hung; retry or close the tab"
            )
        reply = slot[1]
        if reply is None:
            raise BrowserError("the DevTools connection closed during " + method, "the browser has exited; relaunch it")
        if "error" in reply:
            raise BrowserError(
                f"{method} failed: {reply['error'].get('message')}", "check the parameters (selector, url, tab id)"
            )
        return reply.get("result", {})

    def waiter(self, predicate: Predicate) -> Waiter:
        """Start collecting matching events now; pair with :meth:`drop` in a ``finally``."""
        waiter = Waiter(predicate)
        with self._lock:
            self._waiters.append(waiter)
        return waiter

    def drop(self, waiter: Waiter) -> None:
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def listen(self, listener: Callable[[str, dict[str, Any]], None]) -> None:
        """Call ``listener(method, params)`` for every event (on the reader thread)."""
        with self._lock:
            self._listeners.append(listener)

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:  # closing a socket that already broke: it is closed either way
            pass
        self.closed.set()
