"""A waiter's named states and their checked moves (``bridgecli.gateway.waiters``).

Each legal path is walked through the registry's own methods, each move the transition table
forbids raises ``IllegalTransition`` and changes nothing, and the races the gateway really has
(a notify or hand-off after the removal, a withdrawal after the answer) behave as they did
before the states had names. Real objects throughout: a real SQLite store, real threads.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid

import pytest

from bridgecli.envelope import Envelope
from bridgecli.gateway.waiters import TRANSITIONS, IllegalTransition, Waiter, Waiters, WaiterState
from bridgecli.hoststate.store import DRAINED, HELD, Store, StoredMessage

WAITING, OFFERED, ANSWERED, REMOVED = (
    WaiterState.WAITING,
    WaiterState.OFFERED,
    WaiterState.ANSWERED,
    WaiterState.REMOVED,
)


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "state.db")
    yield store
    store.close()


@pytest.fixture
def waiters(store):
    return Waiters(store)


class Answers:
    """An early answer that records what it was given and writes or not, as told."""

    def __init__(self, writes: bool = True, fails: bool = False) -> None:
        self.writes = writes
        self.fails = fails
        self.given: list[list[StoredMessage]] = []

    def __call__(self, handed: list[StoredMessage]) -> bool:
        if self.fails:
            raise OSError("the client is gone")
        self.given.append(list(handed))
        return self.writes


def _env(to: str, in_reply_to: str | None = None) -> Envelope:
    return Envelope(
        kind="REPLY" if in_reply_to else "SEND",
        sender=str(uuid.uuid4()),
        recipient=to,
        content="x",
        in_reply_to=in_reply_to,
    )


def _taken(store: Store, envelope: Envelope) -> StoredMessage:
    """``envelope`` recorded as drained for a waiter, as ``Burst.hand_off`` records it."""
    assert store.record(envelope, DRAINED)
    return StoredMessage(envelope=envelope, state=HELD, received=time.time())


def _commit_for(waiters: Waiters, store: Store, waiter: Waiter) -> StoredMessage:
    """What ``Burst.commit`` then ``Burst.flush`` do for one message taken for ``waiter``: hand
    it over, then notify."""
    stored = _taken(store, _env(waiter.recipient, waiter.in_reply_to))
    assert waiters.hand_over([(waiter, stored)]) == []
    waiters.notify(stored.envelope)
    return stored


def _state(store: Store, msg_id: str) -> str:
    stored = store.get(msg_id)
    assert stored is not None
    return stored.state


# --- the table ----------------------------------------------------------------------------


def test_the_table_names_every_state_and_removed_is_final():
    assert set(TRANSITIONS) == set(WaiterState)
    assert TRANSITIONS[REMOVED] == frozenset()
    assert all(REMOVED in TRANSITIONS[s] for s in (WAITING, OFFERED, ANSWERED))
    assert TRANSITIONS[ANSWERED] == {REMOVED}, "an answered waiter is only ever removed"


@pytest.mark.parametrize("source,target", list(itertools.product(WaiterState, WaiterState)))
def test_every_move_is_made_or_refused_as_the_table_says(waiters, source, target):
    waiter = waiters.add("me")
    waiter.state = source  # the starting point only: the move under test is checked below
    with waiters.lock:
        if target in TRANSITIONS[source]:
            waiter._move(target, "test")
            assert waiter.state is target
        else:
            with pytest.raises(IllegalTransition) as raised:
                waiter._move(target, "test")
            assert waiter.state is source, "a refused move changes nothing"
            assert isinstance(raised.value, RuntimeError)
            assert (raised.value.from_state, raised.value.to_state) == (source, target)
            assert f"{source.name} -> {target.name}" in str(raised.value)


# --- legal paths ----------------------------------------------------------------------------


def test_a_waiter_is_waiting_once_added_and_removed_once_removed(waiters):
    waiter = waiters.add("me", claims=1)
    assert waiter.state is WAITING and list(waiters) == [waiter]
    waiters.remove(waiter)
    assert waiter.state is REMOVED and list(waiters) == [] and not waiters


def test_an_offer_is_answered_with_the_handed_messages_and_withdrawn_as_answered(waiters, store):
    me, asked = str(uuid.uuid4()), str(uuid.uuid4())
    waiter = waiters.add(me, asked, claims=1)
    answers = Answers()
    assert waiters.offer(waiter, answers) and waiter.state is OFFERED
    stored = _commit_for(waiters, store, waiter)
    assert waiter.state is ANSWERED and answers.given == [[stored]]
    assert waiters.take_handed(waiter) == [], "answered messages are no longer the waiter's"
    assert waiter.event.is_set() and waiter.take_notification()
    assert waiters.withdraw(waiter) is True
    assert waiters.withdraw(waiter) is True, "it stays answered: its client has the answer"
    waiters.remove(waiter)
    assert waiter.state is REMOVED and _state(store, stored.envelope.msg_id) == DRAINED


def test_a_withdrawn_offer_leaves_the_messages_to_the_waiters_thread(waiters, store):
    me = str(uuid.uuid4())
    waiter = waiters.add(me, claims=5)
    answers = Answers()
    assert waiters.offer(waiter, answers)
    assert waiters.await_answer(waiter, 0.01) is False
    assert waiter.state is WAITING and waiter.answer is None
    stored = _commit_for(waiters, store, waiter)
    assert answers.given == [] and waiter.state is WAITING
    assert waiter.wait(0) and waiter.take_notification()
    assert waiters.take_handed(waiter) == [stored]
    waiters.remove(waiter)


@pytest.mark.parametrize("answers", [Answers(writes=False), Answers(fails=True)], ids=["not written", "failed"])
def test_an_answer_not_written_goes_back_to_waiting_with_the_messages_still_handed(waiters, store, answers):
    me = str(uuid.uuid4())
    waiter = waiters.add(me, claims=5)
    assert waiters.offer(waiter, answers)
    stored = _commit_for(waiters, store, waiter)
    assert waiter.state is WAITING and waiter.answer is None
    more = _commit_for(waiters, store, waiter)  # no second try: the offer is spent
    assert len(answers.given) == (0 if answers.fails else 1)
    assert waiters.withdraw(waiter) is False and waiter.state is WAITING
    assert waiters.take_handed(waiter) == [stored, more]
    waiters.remove(waiter)


def test_an_offer_is_refused_once_messages_were_handed_over(waiters, store):
    me = str(uuid.uuid4())
    waiter = waiters.add(me, claims=5)
    stored = _commit_for(waiters, store, waiter)  # came between the look and the offer
    answers = Answers()
    assert waiters.offer(waiter, answers) is False
    assert waiter.state is WAITING and waiter.answer is None and answers.given == []
    assert waiters.take_handed(waiter) == [stored]
    waiters.remove(waiter)


def test_an_offered_waiter_may_be_removed_and_its_handed_messages_are_held_again(waiters, store):
    me = str(uuid.uuid4())
    waiter = waiters.add(me, claims=5)
    other = waiters.add(me)  # told when the message is held again
    assert waiters.offer(waiter, Answers())
    stored = _taken(store, _env(me))
    assert waiters.hand_over([(waiter, stored)]) == []
    waiters.remove(waiter)  # as when its publish failed
    assert waiter.state is REMOVED and waiter.answer is None and waiter.handed == []
    assert _state(store, stored.envelope.msg_id) == HELD
    assert other.wait(0) and other.take_notification()
    waiters.remove(other)


def test_wait_consumes_the_wake_up_and_forget_wake_drops_one_seen(waiters):
    waiter = waiters.add("me")
    assert waiter.wait(0) is False
    waiter.wake()
    assert waiter.wait(0) is True and waiter.wait(0) is False
    waiter.wake()
    waiter.forget_wake()
    assert waiter.wait(0) is False
    assert waiter.take_notification() is False, "a bare wake-up (a failed confirm) notifies nothing"
    waiters.remove(waiter)


def test_on_wake_is_called_from_the_waking_thread_until_cleared(waiters):
    waiter = waiters.add("me")
    calls: list[str] = []
    waiter.call_on_wake(lambda: calls.append(threading.current_thread().name))
    waker = threading.Thread(target=waiter.wake, name="waker")
    waker.start()
    waker.join(10)
    assert calls == ["waker"]
    waiter.call_on_wake(None)
    waiter.wake()
    assert calls == ["waker"]
    waiters.remove(waiter)


def test_a_waiting_thread_is_woken_by_the_commit(waiters, store):
    me = str(uuid.uuid4())
    waiter = waiters.add(me, claims=1)
    got: list[bool] = []
    thread = threading.Thread(target=lambda: got.append(waiter.wait(10) and waiter.take_notification()))
    thread.start()
    _commit_for(waiters, store, waiter)
    thread.join(10)
    assert got == [True]
    waiters.remove(waiter)


# --- illegal moves ----------------------------------------------------------------------------


def _in_state(waiters: Waiters, store: Store, state: WaiterState, recipient: str | None = None) -> Waiter:
    """A waiter (for ``recipient``, default a new gid) brought to ``state`` by the registry's own
    methods."""
    waiter = waiters.add(recipient or str(uuid.uuid4()), claims=5)
    if state in (OFFERED, ANSWERED):
        assert waiters.offer(waiter, Answers())
    if state is ANSWERED:
        _commit_for(waiters, store, waiter)
    if state is REMOVED:
        waiters.remove(waiter)
    assert waiter.state is state
    return waiter


@pytest.mark.parametrize("state", [OFFERED, ANSWERED, REMOVED])
def test_offering_anything_but_a_waiting_waiter_raises(waiters, store, state):
    waiter = _in_state(waiters, store, state)
    before = waiter.answer
    with pytest.raises(IllegalTransition, match=f"{state.name} -> OFFERED"):
        waiters.offer(waiter, Answers())
    assert waiter.state is state and waiter.answer is before


@pytest.mark.parametrize("state", [WAITING, ANSWERED, REMOVED])
def test_answering_without_an_open_offer_raises(waiters, store, state):
    waiter = _in_state(waiters, store, state)
    answers = Answers()
    waiter.answer = answers  # even with an answer at hand: the state decides
    with waiters.lock, pytest.raises(IllegalTransition, match=f"{state.name} -> ANSWERED"):
        waiters._answer(waiter)
    assert waiter.state is state and answers.given == []


def test_removing_twice_raises(waiters, store):
    waiter = _in_state(waiters, store, REMOVED)
    with pytest.raises(IllegalTransition, match="REMOVED -> REMOVED"):
        waiters.remove(waiter)


def test_withdrawing_from_a_removed_waiter_raises(waiters, store):
    waiter = _in_state(waiters, store, REMOVED)
    with pytest.raises(IllegalTransition, match="REMOVED -> WAITING"):
        waiters.withdraw(waiter)


# --- the races the gateway has --------------------------------------------------------------


def test_a_notify_after_the_removal_touches_nothing(waiters, store):
    me = str(uuid.uuid4())
    waiter = _in_state(waiters, store, REMOVED, me)
    waiters.notify(_env(me))
    assert waiter.state is REMOVED and not waiter.event.is_set() and not waiter.notified
    waiter.wake()  # a failed confirm after the removal: harmless
    assert waiter.state is REMOVED


def test_a_hand_off_to_a_removed_waiter_is_refused_for_the_caller_to_hold_again(waiters, store):
    me = str(uuid.uuid4())
    gone, staying = waiters.add(me, claims=1), waiters.add(me, claims=1)
    lost, kept = _taken(store, _env(me)), _taken(store, _env(me))
    waiters.remove(gone)  # timed out between the hand-off's record and its commit
    assert waiters.hand_over([(gone, lost), (staying, kept)]) == [lost.envelope.msg_id]
    assert gone.handed == [] and gone.state is REMOVED
    assert waiters.take_handed(staying) == [kept]
    waiters.remove(staying)


def test_messages_handed_to_an_answered_waiter_are_held_again_at_its_removal(waiters, store):
    me = str(uuid.uuid4())
    waiter = _in_state(waiters, store, ANSWERED, me)
    other = waiters.add(me)
    late = _commit_for(waiters, store, waiter)  # the next burst, before the answered one left
    assert waiter.state is ANSWERED and waiter.handed == [late]
    assert waiters.withdraw(waiter) is True
    assert other.wait(0) and other.take_notification()  # told of the commit; now of the release
    waiters.remove(waiter)
    assert _state(store, late.envelope.msg_id) == HELD
    assert other.wait(0) and other.take_notification()
    waiters.remove(other)


def _race_answer_and_withdrawal(waiters: Waiters, store: Store, me: str, lead: float) -> bool:
    """One round: the committing thread's notify against the held wait's withdrawal. ``lead``
    seconds: the committing thread's head start (negative: the withdrawal's; 0: none, a true
    race). True when withdraw said the answer went out."""
    waiter = waiters.add(me, claims=1)
    answers = Answers()
    assert waiters.offer(waiter, answers)
    stored = _taken(store, _env(me))
    assert waiters.hand_over([(waiter, stored)]) == []
    start = threading.Barrier(2)
    withdrawn: list[bool] = []

    def committing() -> None:
        start.wait()
        if lead < 0:
            time.sleep(-lead)  # a sleep lets the other thread run: a busy loop would keep the GIL
        waiters.notify(stored.envelope)

    def withdrawing() -> None:
        start.wait()
        if lead > 0:
            time.sleep(lead)
        withdrawn.append(waiters.withdraw(waiter))

    threads = [threading.Thread(target=committing), threading.Thread(target=withdrawing)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    [answered] = withdrawn
    assert len(answers.given) == (1 if answered else 0), "answered once, or not at all"
    assert waiter.state is (ANSWERED if answered else WAITING)
    assert waiters.take_handed(waiter) == ([] if answered else [stored])
    waiters.remove(waiter)
    return answered


def test_an_answer_racing_its_withdrawal_goes_out_exactly_when_withdraw_says_so(waiters, store):
    """Whichever thread wins, the client is answered once or not at all, and withdraw tells
    which. Most rounds are true races; a few give one side a head start, so both orders occur."""
    me = str(uuid.uuid4())
    outcomes = set()
    leads = itertools.cycle([0.0] * 8 + [0.005, -0.005])
    for _ in range(200):
        outcomes.add(_race_answer_and_withdrawal(waiters, store, me, next(leads)))
    assert outcomes == {True, False}, "one order of the race never happened"
