"""Complete WebSocket text frames handed over straight from websockets' reading thread.

Relies on ``process_event`` of ``websockets.sync``'s connections, which its source files under
private methods: the reading thread calls it per frame, in order, after releasing the protocol
lock, so the callback may send. The subclasses get in through the documented
``create_connection=`` argument. Gains: the thread wake-up per frame of the queued ``recv()``
(docs/decisions/browser-transport-on-websockets-sync.md). If that changes,
``tests/private_apis/test_websockets_events.py`` fails: uncalled, frames take the queued path
(slower, still right); called under the lock, a send would deadlock. Fragmented or binary
messages keep the queued path for good, so frames never reorder.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from websockets.frames import Frame, Opcode
from websockets.sync.client import ClientConnection
from websockets.sync.server import ServerConnection

_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)


class DispatchMixin:
    """Adds :meth:`enable_dispatch` to a websockets sync connection class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # set before the base __init__, which may start the reading thread
        self._dispatch_lock = threading.Lock()
        self._dispatch: Callable[[bytes], None] | None = None
        self._queued_only = False  # set for good once a fragmented/binary message shows up
        super().__init__(*args, **kwargs)

    def process_event(self, event: Any) -> None:
        if not (isinstance(event, Frame) and event.opcode in _DATA):
            super().process_event(event)  # type: ignore[misc]
            return
        with self._dispatch_lock:
            dispatch = self._dispatch
            if dispatch is None or self._queued_only or event.opcode is not Opcode.TEXT or not event.fin:
                if event.opcode is not Opcode.TEXT or not event.fin:
                    self._queued_only = True
                    self._dispatch = None
                dispatch = None
                super().process_event(event)  # type: ignore[misc]
        if dispatch is not None:
            dispatch(bytes(event.data))

    def enable_dispatch(self, dispatch: Callable[[str | bytes], None]) -> None:
        """Hand frames already queued to ``dispatch`` in order, then switch to the fast path.
        ``dispatch`` then runs on the reading thread: it must not block for long."""
        with self._dispatch_lock:
            while True:
                try:
                    data = self.recv(timeout=0)  # type: ignore[attr-defined]
                except TimeoutError:
                    break
                dispatch(data)
            if not self._queued_only:
                self._dispatch = dispatch


class DispatchingServerConnection(DispatchMixin, ServerConnection):
    """Server side (the broker)."""


class DispatchingClientConnection(DispatchMixin, ClientConnection):
    """Client side (the guest agent)."""
