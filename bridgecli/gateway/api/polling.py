"""The ``poll`` operation (take or peek at held messages, with or without waiting), in the two
steps the local API runs it in.

:func:`prepare` reads the request and registers its waiter; :meth:`Polling.look` takes what is
held; :meth:`Polling.finish` waits for what comes. The loop thread that reads a request runs the
first look itself and holds the first wait without a thread (:mod:`.heldwaits`); :func:`op_poll`
runs all of it on a thread that may wait.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bridgecli.gateway.api.answers import PENDING, EarlyAnswer, answered, early_answer
from bridgecli.gateway.api.contract import ApiGateway
from bridgecli.gateway.api.sending import LOOK_EVERY, MAX_WAIT
from bridgecli.gateway.api.speaker import speaker
from bridgecli.hoststate.store import DRAINED, TAKEN
from bridgecli.hoststate.wire import message_dict
from bridgecli.requests import PollRequest

if TYPE_CHECKING:
    from bridgecli.gateway.waiters import Waiter
    from bridgecli.hoststate.store import StoredMessage


@dataclass
class Polling:
    """A prepared poll: who polls, until when, and the waiter of a ``wait``."""

    request: PollRequest
    gid: str
    #: the peer it polls, as a gid (None: anyone)
    peer: str | None
    deadline: float
    #: a default identity registered for it just now (the response's ``registered``)
    registered: dict[str, Any]
    early: EarlyAnswer | None = None
    waiter: Waiter | None = None
    #: what the early answer wrote, once it went out
    sent: list[dict[str, Any]] = field(default_factory=list)

    def result_of(self, gw: ApiGateway, messages: list[StoredMessage]) -> dict[str, Any]:
        """The response to ``messages``; their senders learn they were read, unless peeked at."""
        result = {"gid": self.gid, "messages": [message_dict(m) for m in messages], **self.registered}
        if self.peer:
            result["peer"] = self.peer
        if self.request.confirm and not self.request.peek and messages:
            result[PENDING] = [m.envelope.msg_id for m in messages]
        if messages and not self.request.peek:
            pulled = [(m.envelope.msg_id, m.envelope.recipient, m.envelope.sender_host) for m in messages]
            gw.tracking.read(pulled, "poll")
        return result

    def look(self, gw: ApiGateway) -> dict[str, Any] | None:
        """The response if there is one now (messages, no wait, or the time is up), else None."""
        request, waiter = self.request, self.waiter
        limit = int(request.limit)
        if request.peek:
            messages = gw.store.peek(self.gid, limit=limit, sender=self.peer)
        else:
            handed = gw.waiters.take_handed(waiter) if waiter is not None else []
            mark = TAKEN if request.confirm else DRAINED
            messages = (
                gw.store.drain(self.gid, limit=limit - len(handed), mark=mark, sender=self.peer)
                if len(handed) < limit
                else []
            )
            if handed:
                messages = sorted(messages + handed, key=lambda m: m.received)
        if messages or waiter is None or time.monotonic() >= self.deadline:
            return self.result_of(gw, messages)
        return None

    def offer(self, gw: ApiGateway) -> bool:
        """Offer the early answer for the first wait, after a :meth:`look` that found nothing;
        False when there is none to offer or messages were handed over since."""
        if self.early is None or self.waiter is None or self.request.peek:
            return False

        def build(handed: list[StoredMessage]) -> dict[str, Any]:
            return self.result_of(gw, sorted(handed, key=lambda m: m.received))

        return gw.waiters.offer(self.waiter, early_answer(self.early, build, self.sent))

    def finish(self, gw: ApiGateway, first_wait_done: bool = False) -> dict[str, Any]:
        """Look and wait until there is a response; ``first_wait_done``: the first wait, the
        one that may be answered early, is over. Removes the waiter."""
        waiter = self.waiter
        may_offer = not first_wait_done
        try:
            while True:
                response = self.look(gw)
                if response is not None:
                    return response
                assert waiter is not None  # look answers a poll without one
                timeout = min(self.deadline - time.monotonic(), LOOK_EVERY)
                if may_offer:  # the first wait only: later ones are rare
                    may_offer = False
                    if self.offer(gw) and gw.waiters.await_answer(waiter, timeout):
                        return answered(self.sent[0])
                    waiter.forget_wake()
                else:
                    waiter.wait(timeout)
        finally:
            if waiter is not None:
                gw.waiters.remove(waiter)


def prepare(gw: ApiGateway, wire: dict[str, Any], early: EarlyAnswer | None, may_wait: bool = True) -> Polling:
    """Read the request and register the waiter of a ``wait``. Without ``may_wait`` a step
    that waits raises :class:`~.contract.WouldWait` before anything is
    registered."""
    request = PollRequest.from_wire(wire)
    peer = gw.resolve_target(request.peer, force=True, may_wait=may_wait) if request.peer else None
    registered: dict[str, Any] = {}
    identity = speaker(gw, request.gid, registered, may_wait)
    deadline = time.monotonic() + min(float(request.wait or 0), MAX_WAIT)
    polling = Polling(request, identity.gid, peer, deadline, registered, early)
    if request.wait:
        # a draining poll takes messages handed over at hold time; a peek only wants the wakeup
        claims = 0 if request.peek else int(request.limit)
        polling.waiter = gw.waiters.add(identity.gid, claims=claims, two_phase=request.confirm, peer=peer)
    return polling


def op_poll(gw: ApiGateway, early: EarlyAnswer | None = None, **wire: Any) -> dict[str, Any]:
    """Drain held messages (:class:`~bridgecli.requests.PollRequest`); with ``peek`` return
    them without draining — the caller then confirms with op ``ack`` once it has handed them
    on (no loss if it dies in between). With ``confirm`` they are taken, not drained, until
    the client confirms them (op ``confirm``), and held again if it goes away first. With
    ``peer`` (a gid or label) only that sender's messages are taken; the others stay held.
    ``early``: the first wake-up's messages may be answered from the commit."""
    return prepare(gw, wire, early).finish(gw)
