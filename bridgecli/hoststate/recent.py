"""The envelopes this process last handed to local clients (a poll, a ``send --wait``), so a
reply to one is addressed without reading the store.

Why: an agent usually answers the message it was just handed, and that read of the store sat on
the reply's path, on the thread that publishes every local send.
"""

from __future__ import annotations

from bridgecli.envelope import Envelope

#: envelopes kept; the oldest goes first
SIZE = 256
#: larger messages are not kept (read from the store instead): the memory stays small
MAX_CHARS = 16 * 1024


class RecentEnvelopes:
    """A bounded map msg id → envelope of committed received messages, safe to use from any
    thread (each step is one dict operation). An envelope never changes once received, so an
    entry is never stale; the store stays the authority for everything else, such as a
    message's state. Ids are stored as received: lower case (see :mod:`bridgecli.envelope`)."""

    def __init__(self, size: int = SIZE) -> None:
        self._size = size
        self._by_id: dict[str, Envelope] = {}

    def add(self, envelope: Envelope) -> None:
        if len(envelope.content) + len(envelope.raw or "") > MAX_CHARS:
            return
        by_id = self._by_id
        by_id[envelope.msg_id] = envelope
        if len(by_id) > self._size:
            try:
                del by_id[next(iter(by_id))]
            except (KeyError, RuntimeError, StopIteration):
                pass  # another thread changed the map meanwhile: it evicts on its own add

    def get(self, msg_id: str) -> Envelope | None:
        return self._by_id.get(msg_id.lower())

    def clear(self) -> None:
        """Forget all (the store forgot some of them)."""
        self._by_id.clear()
