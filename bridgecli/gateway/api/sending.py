"""The ``send`` operation (send/ask to a TARGET, reply/answer to a received MSGID, with or
without waiting for the reply), in the two steps the local API runs it in.

:func:`prepare` reads, addresses and composes the request and registers its waiter; the
messages are then published; :func:`finish` waits for what the client is owed. The loop thread
that reads a request runs the first step and the publish itself, without waiting (:func:`start`),
so a message leaves the gateway without a thread hand-off; :func:`op_send` runs all of it on a
thread that may wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bridgecli import messaging, sender
from bridgecli.errors import DeadLettered, Timeout
from bridgecli.gateway.api.answers import PENDING, EarlyAnswer, answered, early_answer
from bridgecli.gateway.api.contract import ApiGateway, WouldWait
from bridgecli.gateway.api.speaker import speaker
from bridgecli.hoststate.store import DELIVERED, DRAINED, TAKEN
from bridgecli.hoststate.wire import message_dict
from bridgecli.requests import SendRequest

if TYPE_CHECKING:
    from bridgecli.envelope import Envelope
    from bridgecli.gateway.tracking import Tracking
    from bridgecli.gateway.waiters import Waiter

MAX_WAIT = 24 * 3600.0
#: a waiting request looks for its messages at least this often (seconds), woken or not
LOOK_EVERY = 1.0
#: how long a publish may wait for the broker's confirm (the publish lane's own default)
CONFIRM_TIMEOUT = 30.0


@dataclass
class Sending:
    """A prepared send: what goes out, what the client is told, and the wait for a reply."""

    request: SendRequest
    envelopes: list[Envelope]
    #: the response's fields so far (msgId or msgIds, to, kind, registered)
    result: dict[str, Any]
    gid: str
    waiter: Waiter | None = None
    #: the early answer was offered to the thread that hands the reply over
    offered: bool = False
    #: what that answer wrote, once it went out
    sent: list[dict[str, Any]] = field(default_factory=list)
    #: when the wait for the reply began (``time.monotonic()``)
    started: float = field(default_factory=time.monotonic)
    #: a failed confirm wakes the waiter (:meth:`watch`)
    watched: bool = False

    def watch(self, confirmed: Future) -> None:
        """Let a failed ``confirmed`` end the wait early (once). Only a failure does: the reply
        is what is waited for, and the timeout path waits for the confirm itself."""
        waiter = self.waiter
        if waiter is None or self.watched:
            return
        self.watched = True

        def on_confirm(done: Future) -> None:
            if done.cancelled() or done.exception() is not None:
                waiter.wake()

        confirmed.add_done_callback(on_confirm)

    @property
    def confirm_timeout(self) -> float:
        return max(CONFIRM_TIMEOUT, len(self.envelopes) * 0.05)


def prepare(gw: ApiGateway, wire: dict[str, Any], early: EarlyAnswer | None, may_wait: bool = True) -> Sending:
    """Read, address and compose the request; register the waiter of a ``wait`` (and offer
    ``early``). Without ``may_wait`` a step that waits raises
    :class:`~.contract.WouldWait` before anything is registered."""
    request = SendRequest.from_wire(wire)
    to = messaging.address(
        request, gw.store, lambda target, force: gw.resolve_target(target, force=force, may_wait=may_wait)
    )
    result: dict[str, Any] = {}
    given = sender.named(request.sender, to.delivered_to, gw.registry)
    identity = speaker(gw, given, result, may_wait)  # after the recipient: a mistyped target registers nothing
    envelopes = messaging.compose_request(request, identity, to, host=gw.host, max_content_bytes=gw.max_content)
    if request.bulk:
        kind = envelopes[0].kind if envelopes else None
        result = {"msgIds": [e.msg_id for e in envelopes], "to": to.recipient, "kind": kind, **result}
        return Sending(request, envelopes, result, identity.gid)
    [envelope] = envelopes
    result = {"msgId": envelope.msg_id, "to": to.recipient, "kind": envelope.kind, **result}
    sending = Sending(request, envelopes, result, identity.gid)
    if request.wait:
        sending.waiter = gw.waiters.add(identity.gid, envelope.msg_id, claims=1, two_phase=request.confirm)
        if early is not None and not request.may_be_resent:  # a resend looks in the store first
            build = early_answer(
                early, lambda handed: _with_reply(gw, result, message_dict(handed[0]), request.confirm), sending.sent
            )
            sending.offered = gw.waiters.offer(sending.waiter, build)
    return sending


def finish(gw: ApiGateway, sending: Sending, confirmed: list[Future], first_wait_done: bool = False) -> dict[str, Any]:
    """Wait for the confirms, or for the reply of a ``wait`` (its confirm with it); return the
    response. ``first_wait_done``: the wait the early answer was offered for is over (it was
    held on the loop). Removes the waiter."""
    from bridgecli.gateway.publishing import await_confirm  # pika: not for the CLI's imports of this module

    request, waiter = sending.request, sending.waiter
    if waiter is None:
        deadline = time.monotonic() + sending.confirm_timeout
        for future in confirmed:
            await_confirm(future, deadline)
        return sending.result
    try:
        [future] = confirmed
        sending.watch(future)
        offered = sending.offered and not first_wait_done
        if offered and gw.waiters.await_answer(waiter, min(float(request.wait or 0), LOOK_EVERY)):
            return answered(sending.sent[0])
        reply = _await_reply(
            gw,
            waiter,
            sending.gid,
            sending.envelopes[0].msg_id,
            float(request.wait or 0),
            future,
            look_first=request.may_be_resent,
            mark=TAKEN if request.confirm else DRAINED,
            started=sending.started,
        )
        return _with_reply(gw, sending.result, reply, request.confirm)
    finally:
        gw.waiters.remove(waiter)


def op_send(gw: ApiGateway, early: EarlyAnswer | None = None, **wire: Any) -> dict[str, Any]:
    """send/ask (to a TARGET) and reply/answer (to a received MSGID); optional wait
    (:class:`~bridgecli.requests.SendRequest`). With ``confirm`` the reply of a ``wait``
    stays recoverable until the client confirms it (op ``confirm``; it is held again if the
    client goes away first). ``early``: the reply may be answered from the commit."""
    sending = prepare(gw, wire, early)
    confirmed = _published(
        gw, sending, lambda: gw.submit(sending.envelopes, sending.request.delay_ms, sending.confirm_timeout)
    )
    return finish(gw, sending, confirmed)


def start(gw: ApiGateway, wire: dict[str, Any], early: EarlyAnswer | None) -> tuple[Sending, list[Future]]:
    """:func:`prepare` and publish on the publish lane's loop thread, which reads the request;
    raises :class:`~.contract.WouldWait` (nothing done yet) where a step
    would wait. The caller then runs :func:`finish` where it may wait, or answers from the
    confirm's callback when there is no reply to wait for."""
    if not gw.can_publish():
        raise WouldWait("the publish lane is not connected")
    sending = prepare(gw, wire, early, may_wait=False)
    confirmed = _published(gw, sending, lambda: gw.publish_in_loop(sending.envelopes, sending.request.delay_ms))
    return sending, confirmed


def _published(gw: ApiGateway, sending: Sending, publish: Callable[[], list[Future]]) -> list[Future]:
    """``publish()``'s confirm futures; when it fails, the send's waiter goes with it. Each
    message is tracked from before its publish (a local recipient's receipt may come before
    the confirm) and marked sent by its confirm, which also archives it (``bridge history``)."""
    tracking = gw.tracking
    if tracking.enabled:
        tracking.sending(sending.envelopes)
    try:
        futures = publish()
    except BaseException:
        if sending.waiter is not None:
            gw.waiters.remove(sending.waiter)
        if tracking.enabled:
            tracking.confirmed_all([e.msg_id for e in sending.envelopes], ok=False)
        raise
    if tracking.enabled:
        for envelope, future in zip(sending.envelopes, futures, strict=True):
            future.add_done_callback(_marks_sent(tracking, envelope.msg_id))
    gw.history.sent_when_confirmed(sending.envelopes, futures)  # archived as sent once confirmed
    return futures


def _marks_sent(tracking: Tracking, msg_id: str) -> Callable[[Future], None]:
    """A confirm's callback that marks ``msg_id`` sent, or forgets it when refused."""
    return lambda done: tracking.confirmed(msg_id, not done.cancelled() and done.exception() is None)


def _with_reply(gw: ApiGateway, result: dict[str, Any], reply: dict[str, Any], confirm: bool) -> dict[str, Any]:
    """A ``send --wait``'s response: ``result`` with its reply, pending if the client confirms;
    the reply's sender learns it was read (``wait``)."""
    gw.tracking.read([(reply["msgId"], reply["to"], reply.get("fromHost"))], "wait")
    out = {**result, "reply": reply}
    if confirm and reply.get("state") != DELIVERED:
        out[PENDING] = [reply["msgId"]]
    return out


def _await_reply(
    gw: ApiGateway,
    waiter: Waiter,
    gid: str,
    msg_id: str,
    timeout: float,
    confirm: Future,
    look_first: bool = True,
    mark: str = DRAINED,
    started: float | None = None,
) -> dict[str, Any]:
    """Wait for the reply and the message's confirm *together*: a reply proves delivery, so
    once it is here the confirm no longer matters (a persistent message may be confirmed only
    after the broker's next disk sync). A failed confirm ends the wait with its error; at the
    timeout an unconfirmed message is waited for first, so "the reply will be held" is never
    said of a message the broker did not take. ``look_first=False`` for an id minted just now;
    ``started``: when the wait began (``time.monotonic()``; default now).
    """
    from bridgecli.gateway.publishing import await_confirm

    started = time.monotonic() if started is None else started
    deadline = started + min(timeout, MAX_WAIT)
    look = look_first  # a resend (--id, --key, a retry) may find its reply here already; then when notified
    while True:
        if look:
            # handed over at hold time (the usual way: no store access), else from the store
            # (a resend, a reply delivered by another backend, a missed wakeup)
            found = next(iter(gw.waiters.take_handed(waiter)), None) or gw.store.take_reply(gid, msg_id, mark=mark)
            if found is not None:
                return message_dict(found)
        if confirm.done() and confirm.exception() is not None:
            raise confirm.exception()  # type: ignore[misc]
        if waiter.failure is not None:  # its receipt says it was dead-lettered: no reply is coming
            raise DeadLettered(f"{msg_id} was dead-lettered: {waiter.failure}", f"see it with `bridge track {msg_id}`")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            await_confirm(confirm, started + CONFIRM_TIMEOUT)
            raise Timeout(
                f"no reply to {msg_id} within {timeout:g}s",
                "the reply will be held for you: collect it later with `bridge poll`",
            )
        woken = waiter.wait(min(remaining, LOOK_EVERY))
        # taken before the look: a reply committed after that sets it (then the event) again,
        # so no notification is lost; the once-a-second timeout still looks, as before
        if waiter.take_notification():
            look = True
        else:
            look = not woken
