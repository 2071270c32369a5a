"""The envelopes this process recorded last, so a reply is addressed without reading the store.

Why: an agent usually answers the message it was just handed, and that read of the store sat on
the reply's path, on the thread that publishes every local send.
"""

from __future__ import annotations

import threading

from bridgecli.envelope import Envelope

#: envelopes kept; the oldest goes first
SIZE = 256
#: larger messages are not kept (read from the store instead): the memory stays small
MAX_CHARS = 16 * 1024


class RecentEnvelopes:
    """A bounded map msg id → envelope of committed received messages (thread-safe). An
    envelope never changes once received, so an entry is never stale; the store stays the
    authority for everything else, such as a message's state."""

    def __init__(self, size: int = SIZE) -> None:
        self._size = size
        self._by_id: dict[str, Envelope] = {}
        self._lock = threading.Lock()

    def add(self, envelope: Envelope) -> None:
        if len(envelope.content) + len(envelope.raw or "") > MAX_CHARS:
            return
        with self._lock:
            self._by_id[envelope.msg_id.lower()] = envelope
            if len(self._by_id) > self._size:
                del self._by_id[next(iter(self._by_id))]

    def get(self, msg_id: str) -> Envelope | None:
        return self._by_id.get(msg_id.lower())

    def clear(self) -> None:
        """Forget all (the store forgot some of them)."""
        with self._lock:
            self._by_id.clear()
