"""Local calls blocked on a message (``send --wait``, ``poll --wait``) and their hand-offs.

Why a module of its own: API threads register and leave, the I/O thread hands messages over
and wakes them; one lock and one list keep that consistent, and none of it touches pika.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bridgecli.envelope import Envelope
from bridgecli.gateway import log as glog

if TYPE_CHECKING:
    from bridgecli.hoststate.store import Store, StoredMessage

logger = logging.getLogger("bridgecli.gateway")


@dataclass(eq=False)
class Waiter:
    """A blocked ``send --wait`` / ``poll --wait``: on a local API worker, or held on its loop."""

    recipient: str
    in_reply_to: str | None
    #: how many messages it takes at hold time (see ``Burst.hand_off``): 1 for a
    #: ``send --wait``, the limit for a draining ``poll --wait``; 0 = it only wants a wakeup
    #: (``poll`` with ``peek``, ``count``), and takes from the store itself
    claims: int = 0
    event: threading.Event = field(default_factory=threading.Event)
    #: set (before ``event``) when a message for it was committed; the confirm of a
    #: ``send --wait`` sets only ``event``, so that wakeup needs no look into the store
    notified: bool = False
    #: messages recorded as drained for it, committed, not yet picked up (:meth:`Waiters.take_handed`)
    handed: list[StoredMessage] = field(default_factory=list)
    #: its client confirms what it gets: hand-offs are recorded ``taken``, not ``drained``
    two_phase: bool = False
    #: a poll for one peer's messages only (its gid), or None for anyone's
    peer: str | None = None
    #: while set, the thread that hands it messages answers its client with them (see
    #: :meth:`Waiters.offer`)
    answer: Callable[[list[StoredMessage]], bool] | None = None
    #: :attr:`answer` wrote the answer: its messages are no longer the waiter's to hand out
    answered: bool = False
    #: called after every wake-up (any thread): a wait held on a loop, with no thread blocked
    #: in :attr:`event`, learns of it this way
    on_wake: Callable[[], None] | None = None

    def wake(self) -> None:
        """Wake whoever waits for this waiter: its thread, or its :attr:`on_wake`."""
        self.event.set()
        on_wake = self.on_wake  # read once: the loop thread may clear it meanwhile
        if on_wake is not None:
            on_wake()


class Waiters:
    """The registry of waiters. ``lock`` guards the list and every waiter's ``handed``;
    ``store`` takes back what a waiter leaves behind."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.lock = threading.Lock()
        self._waiting: list[Waiter] = []

    def __iter__(self) -> Iterator[Waiter]:
        """A snapshot of the registered waiters (safe from any thread)."""
        with self.lock:
            return iter(list(self._waiting))

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def __contains__(self, waiter: object) -> bool:
        """Whether ``waiter`` is still registered (caller holds :attr:`lock`)."""
        return waiter in self._waiting

    def add(
        self,
        recipient: str,
        in_reply_to: str | None = None,
        claims: int = 0,
        two_phase: bool = False,
        peer: str | None = None,
    ) -> Waiter:
        waiter = Waiter(recipient, in_reply_to, claims=claims, two_phase=two_phase, peer=peer)
        with self.lock:
            self._waiting.append(waiter)
        return waiter

    def remove(self, waiter: Waiter) -> None:
        """Unregister ``waiter``; messages handed to it that it did not pick up (it timed out
        or failed as one came) go back on hold, and other waiters are told."""
        with self.lock:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
            leftover, waiter.handed = waiter.handed, []
        if leftover:
            self.store.release([m.envelope.msg_id for m in leftover])
            for stored in leftover:
                self.notify(stored.envelope)

    def take_handed(self, waiter: Waiter) -> list[StoredMessage]:
        """The messages handed to ``waiter`` since it last looked (an API thread's call)."""
        with self.lock:
            handed, waiter.handed = waiter.handed, []
        return handed

    def release_taken(self, msg_ids: list[str]) -> None:
        """A client went away without confirming ``msg_ids``: hold them again and tell the
        other waiters (an API thread's call)."""
        if not msg_ids or not self.store.release(msg_ids):
            return
        for msg_id in msg_ids:
            stored = self.store.get(msg_id)
            if stored is not None:
                self.notify(stored.envelope)
        glog.event(logger, "unconfirmed messages held again", count=len(msg_ids), first=msg_ids[0])

    def notify(self, envelope: Envelope) -> None:
        """Wake every waiter ``envelope`` may be for (it was committed to the store)."""
        with self.lock:
            for waiter in self._waiting:
                if waiter.recipient == envelope.recipient and (
                    waiter.in_reply_to is None or waiter.in_reply_to == envelope.in_reply_to
                ):
                    waiter.notified = True
                    if waiter.answer is not None and waiter.handed:
                        self._answer(waiter)
                    waiter.wake()

    def offer(self, waiter: Waiter, answer: Callable[[list[StoredMessage]], bool]) -> bool:
        """Let the thread that hands ``waiter`` messages answer its client itself with ``answer``
        (a non-blocking write; False leaves the messages to the waiter's thread), until
        :meth:`await_answer` returns. False when messages were handed to it already. Why: one
        thread hand-off less on the way out."""
        with self.lock:
            if waiter.handed:
                return False
            waiter.answer = answer
        return True

    def await_answer(self, waiter: Waiter, timeout: float) -> bool:
        """Wait up to ``timeout`` s for ``waiter``'s wake-up and withdraw its :meth:`offer`. True
        when the offered answer went out; False when the waiter's thread answers as usual."""
        waiter.event.wait(timeout)
        return self.withdraw(waiter)

    def withdraw(self, waiter: Waiter) -> bool:
        """Withdraw ``waiter``'s :meth:`offer`; True when the offered answer went out."""
        with self.lock:
            waiter.answer = None
            answered, waiter.answered = waiter.answered, False
        return answered

    def _answer(self, waiter: Waiter) -> None:
        """Answer ``waiter``'s client with its handed messages (caller holds :attr:`lock`)."""
        answer, waiter.answer = waiter.answer, None
        assert answer is not None
        try:
            sent = answer(waiter.handed)
        except Exception as exc:  # its thread answers instead; the messages stay handed to it
            glog.event(logger, "early answer failed", logging.WARNING, error=f"{type(exc).__name__}: {exc}")
            sent = False
        if sent:
            waiter.answered, waiter.handed = True, []

    def registered(self) -> list[Waiter]:
        """The waiters in registration order (caller holds :attr:`lock`)."""
        return self._waiting
