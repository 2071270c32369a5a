"""The I/O thread's open burst of inline deliveries: one store transaction, the deliveries it
will ack, and the messages in it taken by local waiters (``send --wait`` / ``poll --wait``).

Why an object of its own: a waiter may get a message only once the transaction that recorded
it is committed — handed any sooner, a failed commit or a crash would leave a client answered
with a message the broker then delivers again. :meth:`Burst.commit` is where that order lives.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from bridgecli.envelope import Envelope
from bridgecli.gateway.hold import HoldBackend
from bridgecli.hoststate.store import DRAINED, HELD, TAKEN, Store, StoredMessage

if TYPE_CHECKING:
    from bridgecli.interfaces import DeliveryBackend, Entity

#: one delivery of the burst: (delivery tag, entity, envelope)
Delivery = tuple[int, "Entity", Envelope]


@dataclass(eq=False)
class Waiter:
    """A blocked ``send --wait`` / ``poll --wait`` in a local API thread."""

    recipient: str
    in_reply_to: str | None
    #: how many messages it takes at hold time (see :meth:`Burst.hand_off`): 1 for a
    #: ``send --wait``, the limit for a draining ``poll --wait``; 0 = it only wants a wakeup
    #: (``poll`` with ``peek``, ``count``), and takes from the store itself
    claims: int = 0
    event: threading.Event = field(default_factory=threading.Event)
    #: set (before ``event``) when a message for it was committed; the confirm of a
    #: ``send --wait`` sets only ``event``, so that wakeup needs no look into the store
    notified: bool = False
    #: messages recorded as drained for it, committed, not yet picked up (``Gateway.take_handed``)
    handed: list[StoredMessage] = field(default_factory=list)
    #: its client confirms what it gets: hand-offs are recorded ``taken``, not ``drained``
    two_phase: bool = False
    #: a poll for one peer's messages only (its gid), or None for anyone's
    peer: str | None = None


class Burst:
    """The open burst (I/O thread only). ``waiters`` and ``lock`` are the gateway's own list of
    waiters and its lock; ``stopping`` is set when the gateway stops."""

    def __init__(self, store: Store, waiters: list[Waiter], lock: threading.Lock,
                 stopping: threading.Event) -> None:
        self.store = store
        self.waiters = waiters
        self.lock = lock
        self.stopping = stopping
        #: written in the open transaction, acked once it is committed
        self.deliveries: list[Delivery] = []
        #: messages of the open transaction recorded as taken by a waiter, given at the commit
        self.handoffs: list[tuple[Waiter, StoredMessage]] = []

    def __len__(self) -> int:
        return len(self.deliveries)

    def add(self, tag: int, entity: "Entity", backend: "DeliveryBackend", envelope: Envelope,
            deliver: Callable[[], None]) -> int:
        """Take ``envelope`` into the open transaction: handed to a waiter for it, else
        ``deliver()`` (the backend's write). Whatever ``deliver`` raises leaves it out of the
        burst. Returns how many deliveries the burst now has."""
        self.store.begin_batch()
        if not self.hand_off(backend, envelope):
            deliver()
        self.deliveries.append((tag, entity, envelope))
        return len(self.deliveries)

    def hand_off(self, backend: "DeliveryBackend", envelope: Envelope) -> bool:
        """Hold a message as already taken by a local ``send --wait`` / ``poll --wait`` that
        waits for it: one write (its dedup record, state ``drained``) in the open transaction,
        instead of holding it and then draining it in a second transaction from the API
        thread. The waiter gets it only at :meth:`commit`; a crash before that leaves it
        unacked and redelivered, as for any held message. True when the message is dealt with."""
        if not self.waiters or not isinstance(backend, HoldBackend) or self.stopping.is_set():
            return False  # stopping: the local API is going away, so hold it for the next poll
        waiter = None
        with self.lock:
            for candidate in self.waiters:
                if candidate.recipient != envelope.recipient or candidate.peer not in (None, envelope.sender):
                    continue
                # its claims so far: handed over, or in this burst (only this thread adds those)
                claimed = len(candidate.handed) + sum(1 for w, _ in self.handoffs if w is candidate)
                if candidate.claims <= claimed:
                    continue
                if candidate.in_reply_to is None:
                    waiter = waiter or candidate  # a poll takes it unless a `send --wait` waits for it
                elif candidate.in_reply_to == envelope.in_reply_to:
                    waiter = candidate
                    break
        if waiter is None:
            return False
        received = time.time()
        if backend.record(envelope, TAKEN if waiter.two_phase else DRAINED, received=received):
            # "held" as a drain reports it: it was held for the waiter and taken at once
            self.handoffs.append((waiter, StoredMessage(envelope=envelope, state=HELD, received=received)))
        return True  # taken, or a duplicate recorded before (dropped, as the backend would)

    def commit(self) -> list[Delivery]:
        """Commit the open transaction, *then* give each taken message to its waiter; returns
        the deliveries to ack, and the next burst starts empty. A failed commit is rolled back
        and raised, and hands nothing over."""
        deliveries, handoffs = self.deliveries, self.handoffs
        self.deliveries, self.handoffs = [], []
        try:
            self.store.commit_batch()
        except Exception:
            self._end_failed_commit()
            raise
        self._give(handoffs)
        return deliveries

    def rollback(self) -> None:
        """Undo the open burst: none of it is acked (the broker redelivers it), and none of its
        hand-offs happened."""
        self.deliveries, self.handoffs = [], []
        self.store.rollback_batch()

    def _end_failed_commit(self) -> None:
        """Make sure a failed commit leaves no transaction open (``Store.commit_batch`` rolls
        back itself; an error raised before its COMMIT would not have)."""
        try:
            self.store.rollback_batch()
        except Exception:
            pass  # a failed COMMIT may already have ended the transaction

    def _give(self, handoffs: list[tuple[Waiter, StoredMessage]]) -> None:
        """Hand each taken message to its waiter (``Gateway`` wakes it next); one whose waiter
        has gone meanwhile goes back on hold for the next poll, and so does every one when the
        gateway is stopping (its API threads may not get to answer)."""
        if not handoffs:
            return
        orphans = []
        stopping = self.stopping.is_set()
        with self.lock:
            for waiter, stored in handoffs:
                if not stopping and waiter in self.waiters:  # Waiter compares by identity
                    waiter.handed.append(stored)
                else:
                    orphans.append(stored.envelope.msg_id)
        if orphans:
            self.store.release(orphans)
