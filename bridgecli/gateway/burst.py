"""The I/O thread's open burst of inline deliveries: one store transaction, the deliveries it
will ack, and the messages in it taken by local waiters (``send --wait`` / ``poll --wait``).

Why an object of its own: a waiter may get a message only once the transaction that recorded
it is committed — handed any sooner, a failed commit or a crash would leave a client answered
with a message the broker then delivers again. :meth:`Burst.commit` is where that order lives.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from bridgecli.envelope import Envelope
from bridgecli.gateway import log as glog
from bridgecli.gateway.waiters import Waiter, Waiters
from bridgecli.hoststate.store import DRAINED, HELD, TAKEN, Store, StoredMessage
from bridgecli.hoststate.transaction import Transaction
from bridgecli.interfaces import BackendTraits, RecordingBackend

if TYPE_CHECKING:
    from bridgecli.interfaces import DeliveryBackend, Entity

logger = logging.getLogger("bridgecli.gateway")

#: one delivery of the burst: (delivery tag, entity, envelope)
Delivery = tuple[int, "Entity", Envelope]
#: committed deliveries wait at most this long (seconds) for their sync and acks, so that one
#: sync and one ack frame serve the bursts of several round trips
ACK_DELAY = 0.025
#: ... or until this many are waiting: well below the prefetch window (100), which must never
#: run dry for want of acks
ACK_GROUP = 32


class Burst:
    """The open burst (I/O thread only). ``waiters`` is the gateway's registry of waiters;
    ``stopping`` is set when the gateway stops."""

    def __init__(self, store: Store, waiters: Waiters, stopping: threading.Event) -> None:
        self.store = store
        self.waiters = waiters
        self.stopping = stopping
        #: the open store transaction (None between bursts): every write of the burst joins it
        self.tx: Transaction | None = None
        #: written in the open transaction, acked once it is committed
        self.deliveries: list[Delivery] = []
        #: messages of the open transaction recorded as taken by a waiter, given at the commit
        self.handoffs: list[tuple[Waiter, StoredMessage]] = []
        #: delivery tags handed to worker threads and not yet acked: while one is older than
        #: the burst's last tag, the burst cannot be acked with one ``multiple`` ack
        self.at_worker: set[int] = set()
        #: committed bursts waiting for the sync and their acks: (channel, acks) each
        self.unacked: list[tuple[Any, list[tuple[int, bool]]]] = []
        self._unacked_count = 0
        self._unacked_since = 0.0

    def __len__(self) -> int:
        return len(self.deliveries)

    def add(
        self,
        tag: int,
        entity: Entity,
        backend: DeliveryBackend,
        traits: BackendTraits,
        envelope: Envelope,
        deliver: Callable[[Transaction], object],
    ) -> int:
        """Take ``envelope`` into the open transaction: handed to a waiter for it, else
        ``deliver(tx)`` (the backend's write, in that transaction). Whatever ``deliver`` raises
        leaves it out of the burst. Returns how many deliveries the burst now has."""
        if self.tx is None:
            self.tx = self.store.begin()
        if not self.hand_off(backend, traits, envelope):
            deliver(self.tx)
        self.deliveries.append((tag, entity, envelope))
        return len(self.deliveries)

    def hand_off(self, backend: DeliveryBackend, traits: BackendTraits, envelope: Envelope) -> bool:
        """Hold a message as already taken by a local ``send --wait`` / ``poll --wait`` that
        waits for it: one write (its dedup record, state ``drained``) in the open transaction,
        instead of holding it and then draining it in a second transaction from the API
        thread. The waiter gets it only at :meth:`commit`; a crash before that leaves it
        unacked and redelivered, as for any held message. True when the message is dealt with.
        ``traits``: ``backend``'s (a pulled backend records its messages)."""
        if not self.waiters or not traits.pulled or self.stopping.is_set():
            return False  # stopping: the local API is going away, so hold it for the next poll
        recorder = cast(RecordingBackend, backend)
        waiter = None
        with self.waiters.lock:
            for candidate in self.waiters.registered():
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
        if recorder.record(envelope, TAKEN if waiter.two_phase else DRAINED, received=received, tx=self.tx):
            # "held" as a drain reports it: it was held for the waiter and taken at once
            self.handoffs.append((waiter, StoredMessage(envelope=envelope, state=HELD, received=received)))
        return True  # taken, or a duplicate recorded before (dropped, as the backend would)

    def commit(self) -> list[Delivery]:
        """Commit the open transaction, *then* give each taken message to its waiter; returns
        the deliveries to ack, and the next burst starts empty. A failed commit is rolled back
        and raised, and hands nothing over."""
        deliveries, handoffs, tx = self.deliveries, self.handoffs, self.tx
        self.deliveries, self.handoffs, self.tx = [], [], None
        try:
            if tx is not None:
                tx.commit()
        except Exception:
            self._end_failed_commit(tx)
            raise
        self._give(handoffs)
        return deliveries

    def flush(self, channel: Any) -> list[Delivery]:
        """Commit the burst (and hand its taken messages to their waiters), wake its waiters,
        then queue its acks on ``channel`` (None or closed: they come again, the dedup drops
        them) for the next :meth:`sync_and_ack`, run here once they are due. Returns the
        deliveries committed. A failed commit nacks the burst at once (requeued) instead of
        leaving it unacked until the channel closes."""
        batch = list(self.deliveries)
        try:
            self.commit()
        except Exception as exc:  # a full or failing disk: nothing of the burst is acked or handed
            if not batch:
                raise
            _nack(channel, batch)
            glog.event(
                logger,
                "store commit failed; burst requeued",
                logging.ERROR,
                count=len(batch),
                error=f"{type(exc).__name__}: {exc}",
            )
            return []
        if batch:
            # committed (safe against a crash): wake the waiting `poll --wait` / `send --wait`
            # now; the acks wait for the sync. A power cut before it only means a redelivery
            # (the broker still has every unacked message)
            for _, _, envelope in batch:
                self.waiters.notify(envelope)
            last = batch[-1][0]
            if not any(tag < last for tag in self.at_worker):
                # one ack frame for the whole burst: every unacked delivery up to `last` on this
                # channel is in the batch or queued before it (workers' deliveries are tracked
                # and none is older)
                acks = [(last, True)]
            else:
                acks = [(tag, False) for tag, _, _ in batch]
            if not self.unacked:
                self._unacked_since = time.monotonic()
            self.unacked.append((channel, acks))
            self._unacked_count += len(batch)
        if self.ack_wait(1.0) == 0:
            self.sync_and_ack()
        return batch

    def ack_wait(self, longest: float) -> float:
        """Seconds until the queued acks are due (0: now), at most ``longest``. Due after
        :data:`ACK_DELAY`, with :data:`ACK_GROUP` deliveries queued, or when stopping."""
        if not self.unacked:
            return longest
        if self._unacked_count >= ACK_GROUP or self.stopping.is_set():
            return 0.0
        return max(0.0, min(longest, self._unacked_since + ACK_DELAY - time.monotonic()))

    def sync_and_ack(self) -> None:
        """Sync the store once for every queued burst, then send their acks: acks follow
        durability, power cuts included (group commit). On the I/O thread: the waiters were
        answered before it; a sync thread cost more in delayed acks than the sync blocks
        (docs/benchmarks.md). Why queued: docs/decisions/one-sync-for-several-bursts.md."""
        queued, self.unacked, self._unacked_count = self.unacked, [], 0
        if not queued:
            return
        failed = None
        try:
            self.store.sync()
        except Exception as exc:  # a failing disk: the broker gets the bursts back
            failed = exc
        for channel, acks in queued:
            if channel is None or not channel.is_open:
                continue  # a channel since replaced: its deliveries come again, the dedup drops them
            for tag, multiple in acks:
                if failed is None:
                    channel.basic_ack(tag, multiple=multiple)
                else:
                    channel.basic_nack(tag, multiple=multiple, requeue=True)
        if failed is not None:
            glog.event(logger, "store sync failed; burst requeued", logging.ERROR, error=str(failed))

    def rollback(self) -> None:
        """Undo the open burst: none of it is acked (the broker redelivers it), and none of its
        hand-offs happened."""
        tx, self.deliveries, self.handoffs, self.tx = self.tx, [], [], None
        if tx is not None:
            tx.rollback()

    def requeue(self, channel: Any) -> int:
        """:meth:`rollback`, and have the broker redeliver the burst now rather than when the
        channel closes; returns how many deliveries it had."""
        batch = self.deliveries
        self.rollback()
        _nack(channel, batch)
        return len(batch)

    @staticmethod
    def _end_failed_commit(tx: Transaction | None) -> None:
        """Make sure a failed commit leaves no transaction open (``Transaction.commit`` rolls
        back itself; an error raised before its COMMIT would not have)."""
        try:
            if tx is not None:
                tx.rollback()
        except Exception:
            pass  # a failed COMMIT may already have ended the transaction

    def _give(self, handoffs: list[tuple[Waiter, StoredMessage]]) -> None:
        """Hand each taken message to its waiter (``Gateway`` wakes it next); one whose waiter
        has gone meanwhile goes back on hold for the next poll, and so does every one when the
        gateway is stopping (its API threads may not get to answer)."""
        if not handoffs:
            return
        if self.stopping.is_set():
            orphans = [stored.envelope.msg_id for _, stored in handoffs]
        else:
            orphans = self.waiters.hand_over(handoffs)
        if orphans:
            self.store.release(orphans)


def _nack(channel: Any, batch: list[Delivery]) -> None:
    """Requeue ``batch`` on ``channel``; none on a closed one, whose loss redelivers them anyway."""
    if channel is not None and channel.is_open:
        for tag, _, _ in batch:
            channel.basic_nack(tag, requeue=True)
