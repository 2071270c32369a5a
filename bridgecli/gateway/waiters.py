"""Local calls blocked on a message (``send --wait``, ``poll --wait``) and their hand-offs.

Why a module of its own: API threads register and leave, the I/O thread hands messages over
and wakes them; one lock and one list keep that consistent, and none of it touches pika.
"""

from __future__ import annotations

import enum
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


class WaiterState(enum.Enum):
    """Where a :class:`Waiter` is in its life; :data:`TRANSITIONS` says where it may go next."""

    #: registered; its own thread answers its client
    WAITING = "waiting"
    #: registered; the thread that hands it messages may answer its client (:meth:`Waiters.offer`)
    OFFERED = "offered"
    #: registered; that early answer went out, with what was handed to it until then
    ANSWERED = "answered"
    #: unregistered (final): nothing more is handed to it
    REMOVED = "removed"


#: the legal moves. An offer is made while nothing is handed yet, then answered or taken back
#: (withdrawn, or its answer was not written: the waiter's thread answers instead). An answered
#: waiter stays answered until removed: its client has its answer. The thread that owns a
#: waiter removes it, once.
TRANSITIONS: dict[WaiterState, frozenset[WaiterState]] = {
    WaiterState.WAITING: frozenset({WaiterState.OFFERED, WaiterState.REMOVED}),
    WaiterState.OFFERED: frozenset({WaiterState.ANSWERED, WaiterState.WAITING, WaiterState.REMOVED}),
    WaiterState.ANSWERED: frozenset({WaiterState.REMOVED}),
    WaiterState.REMOVED: frozenset(),
}


class IllegalTransition(RuntimeError):
    """A move :data:`TRANSITIONS` does not allow: a bug in the caller, never a race (the races
    the gateway has are legal moves, or hand-offs :meth:`Waiters.hand_over` refuses)."""

    def __init__(self, action: str, from_state: WaiterState, to_state: WaiterState) -> None:
        super().__init__(f"illegal waiter transition {from_state.name} -> {to_state.name} ({action})")
        self.action = action
        self.from_state = from_state
        self.to_state = to_state


@dataclass(eq=False)
class Waiter:
    """A blocked ``send --wait`` / ``poll --wait``: on a local API worker, or held on its loop.
    Made by :meth:`Waiters.add`. Other modules read its fields and call its methods (or those of
    :class:`Waiters`); only this module writes them, so every change of state is checked here."""

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
    #: set while :attr:`state` is OFFERED: the thread that hands it messages answers its client
    #: with them (see :meth:`Waiters.offer`)
    answer: Callable[[list[StoredMessage]], bool] | None = None
    #: where it is in its life; changed by :meth:`_move` only, under :attr:`Waiters.lock`
    state: WaiterState = WaiterState.WAITING
    #: called after every wake-up (any thread): a wait held on a loop, with no thread blocked
    #: in :meth:`wait`, learns of it this way (:meth:`call_on_wake`)
    on_wake: Callable[[], None] | None = None
    #: why the message a ``send --wait`` waits on was dead-lettered (:meth:`Waiters.fail`)
    failure: str | None = None

    def wake(self) -> None:
        """Wake whoever waits for this waiter: its thread, or its :attr:`on_wake`."""
        self.event.set()
        on_wake = self.on_wake  # read once: the loop thread may clear it meanwhile
        if on_wake is not None:
            on_wake()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for a wake-up and consume it; True when woken. Why consume
        it: the next wait must block until the next wake-up."""
        woken = self.event.wait(timeout)
        self.event.clear()
        return woken

    def forget_wake(self) -> None:
        """Consume a wake-up already seen (one :meth:`Waiters.await_answer` waited for), so that
        the next :meth:`wait` blocks until a new one."""
        self.event.clear()

    def take_notification(self) -> bool:
        """Whether a message for it was committed since it last asked, resetting that. Ask after
        a :meth:`wait` and before looking: a commit after the look sets it again, so none is lost."""
        if self.notified:
            self.notified = False
            return True
        return False

    def call_on_wake(self, on_wake: Callable[[], None] | None) -> None:
        """From now on call ``on_wake`` after every wake-up (any thread), or nothing (None): how
        a wait held on a loop, with no thread in :meth:`wait`, learns of it."""
        self.on_wake = on_wake

    def _move(self, to: WaiterState, action: str) -> None:
        """Move to ``to``, or raise :class:`IllegalTransition` (nothing changed) when
        :data:`TRANSITIONS` does not allow it. The caller holds :attr:`Waiters.lock`, which
        every change of state is made under."""
        if to not in TRANSITIONS[self.state]:
            raise IllegalTransition(action, self.state, to)
        self.state = to


class Waiters:
    """The registry of waiters. ``lock`` guards the list and every waiter's ``handed``,
    ``answer`` and ``state``; ``store`` takes back what a waiter leaves behind."""

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
        """Unregister ``waiter`` (any state to REMOVED; its owner removes it once, a second time
        raises :class:`IllegalTransition`). Messages handed to it that it did not pick up (it
        timed out, failed, or was answered early as more came) go back on hold, and other
        waiters are told."""
        with self.lock:
            waiter._move(WaiterState.REMOVED, "remove")
            self._waiting.remove(waiter)
            waiter.answer = None
            leftover, waiter.handed = waiter.handed, []
        if leftover:
            self.store.release([m.envelope.msg_id for m in leftover])
            for stored in leftover:
                self.notify(stored.envelope)

    def hand_over(self, handoffs: list[tuple[Waiter, StoredMessage]]) -> list[str]:
        """Give each committed message to its waiter, all under one lock acquisition (the I/O
        thread's call); returns the ids of those whose waiter was removed meanwhile, for the
        caller to hold again. Why refused, not raised: a waiter may time out between the
        hand-off's record and its commit. An ANSWERED waiter still takes them (more came before
        its removal), and its removal holds them again."""
        orphans = []
        with self.lock:
            for waiter, stored in handoffs:
                if waiter.state is WaiterState.REMOVED:
                    orphans.append(stored.envelope.msg_id)
                else:
                    waiter.handed.append(stored)
        return orphans

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
                    if waiter.state is WaiterState.OFFERED and waiter.handed:
                        self._answer(waiter)
                    waiter.wake()

    def fail(self, msg_id: str, reason: str) -> int:
        """Wake every ``send --wait`` waiting on ``msg_id``, which was dead-lettered for
        ``reason`` (its receipt said so): it ends with that reason instead of waiting out its
        timeout. Returns how many were woken."""
        with self.lock:
            failed = [w for w in self._waiting if w.in_reply_to == msg_id and w.claims]
            for waiter in failed:
                waiter.failure = reason
        for waiter in failed:
            waiter.wake()
        return len(failed)

    def offer(self, waiter: Waiter, answer: Callable[[list[StoredMessage]], bool]) -> bool:
        """Let the thread that hands ``waiter`` messages answer its client itself with ``answer``
        (a non-blocking write; False leaves the messages to the waiter's thread), until
        :meth:`await_answer` returns: WAITING to OFFERED. False when messages were handed to it
        already (a legal race; it stays WAITING), :class:`IllegalTransition` from another state.
        Why: one thread hand-off less on the way out."""
        with self.lock:
            if waiter.handed and waiter.state is WaiterState.WAITING:
                return False
            waiter._move(WaiterState.OFFERED, "offer")
            waiter.answer = answer
        return True

    def await_answer(self, waiter: Waiter, timeout: float) -> bool:
        """Wait up to ``timeout`` s for ``waiter``'s wake-up and withdraw its :meth:`offer`. True
        when the offered answer went out; False when the waiter's thread answers as usual."""
        waiter.event.wait(timeout)
        return self.withdraw(waiter)

    def withdraw(self, waiter: Waiter) -> bool:
        """Withdraw ``waiter``'s :meth:`offer` (OFFERED to WAITING); True when the offered answer
        went out (ANSWERED, which it stays). Legal races: the answer went out, or was not
        written (WAITING already), before the withdrawal. A removed waiter raises
        :class:`IllegalTransition`: its owner withdraws first."""
        with self.lock:
            state = waiter.state
            if state is WaiterState.ANSWERED:
                return True
            if state is not WaiterState.WAITING:
                waiter._move(WaiterState.WAITING, "withdraw")
            waiter.answer = None
        return False

    def _answer(self, waiter: Waiter) -> None:
        """Answer ``waiter``'s client with its handed messages: OFFERED to ANSWERED, or to
        WAITING when nothing was written (its thread answers, the messages stay handed to it).
        Answering twice raises :class:`IllegalTransition`. Caller holds :attr:`lock`."""
        if waiter.state is not WaiterState.OFFERED:
            raise IllegalTransition("answer", waiter.state, WaiterState.ANSWERED)
        answer, waiter.answer = waiter.answer, None
        assert answer is not None  # set with OFFERED
        try:
            sent = answer(waiter.handed)
        except Exception as exc:  # its thread answers instead; the messages stay handed to it
            glog.event(logger, "early answer failed", logging.WARNING, error=f"{type(exc).__name__}: {exc}")
            sent = False
        if sent:
            waiter._move(WaiterState.ANSWERED, "answer")
            waiter.handed = []
        else:
            waiter._move(WaiterState.WAITING, "answer")

    def registered(self) -> list[Waiter]:
        """The waiters in registration order (caller holds :attr:`lock`)."""
        return self._waiting
