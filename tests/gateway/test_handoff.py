"""Hand-off at hold time: a message for a local ``send --wait`` / draining ``poll --wait`` is
recorded as taken in the I/O thread's burst and given to the waiter after the commit.

The bookkeeping is checked on a real Gateway object, its real burst (``Gateway.burst``, which
its I/O thread fills and commits) and its real SQLite store, with no broker (nothing here
connects); the end-to-end path through two running gateways is in
``test_a_waiting_send_and_poll_take_their_messages_at_hold_time`` below."""

from __future__ import annotations

import inspect
import itertools
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from bridgecli import config as config_mod
from bridgecli.envelope import Envelope
from bridgecli.gateway import burst as burst_mod
from bridgecli.gateway.api.operations import op_poll
from bridgecli.gateway.burst import Burst
from bridgecli.gateway.daemon import Gateway
from bridgecli.gateway.hold import HoldBackend
from bridgecli.hoststate.entities import Registry
from bridgecli.hoststate.store import DRAINED, HELD, TAKEN, Store
from bridgecli.hoststate.transaction import Transaction
from bridgecli.interfaces import BackendContext, Entity
from tests.support.env import BRIDGE_BIN


class CommitMayFail(Transaction):
    """The real transaction, except that its commit fails as on a failing disk when its store
    was told to (:meth:`DiskFailsAtCommit.fail_next_commit`)."""

    def __init__(self, tx: Transaction, store: DiskFailsAtCommit) -> None:
        super().__init__(tx.db)
        self.store = store

    def commit(self) -> None:
        if self.store.take_failure():
            self.rollback()
            raise sqlite3.OperationalError("disk I/O error (injected)")
        super().commit()


class DiskFailsAtCommit(Store):
    """The real store, except that the commit after :meth:`fail_next_commit` fails as on a
    failing disk: the transaction is rolled back and the error raised, as SQLite does."""

    failing = False

    def fail_next_commit(self) -> None:
        self.failing = True

    def take_failure(self) -> bool:
        failing, self.failing = self.failing, False
        return failing

    def begin(self) -> Transaction:
        return CommitMayFail(super().begin(), self)


@pytest.fixture
def gateway(tmp_path, monkeypatch):
    for part in ("CONFIG", "STATE", "DATA", "CACHE"):
        monkeypatch.setenv(f"XDG_{part}_HOME", str(tmp_path / part.lower()))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("BRIDGE_HOST_ID", "handoff-test")
    config = config_mod.load()
    store = DiskFailsAtCommit(tmp_path / "state.db")
    gw = Gateway(config, registry=Registry(tmp_path / "entities.db"), store=store)
    hold = HoldBackend(BackendContext(config=config, state_dir=tmp_path, host_id="handoff-test"), store=store)
    yield gw, hold
    store.close()


_tags = itertools.count(1)


def _env(to: str, content: str = "x", in_reply_to: str | None = None, sender: str | None = None) -> Envelope:
    return Envelope(
        kind="REPLY" if in_reply_to else "SEND",
        sender=sender or str(uuid.uuid4()),
        recipient=to,
        content=content,
        in_reply_to=in_reply_to,
    )


def _deliver(gw: Gateway, hold: HoldBackend, envelope: Envelope) -> bool:
    """One inline hold delivery into the gateway's open burst, as its I/O thread makes it;
    True when a waiter took the message (it is not held)."""
    entity = Entity(
        gid=envelope.recipient, label="me", role="agent", deliver="hold", host="handoff-test", created=time.time()
    )
    gw.burst.add(
        next(_tags), entity, hold, gw.backends.traits(entity), envelope, lambda tx: hold.deliver(entity, envelope, tx)
    )
    stored = gw.store.get(envelope.msg_id)  # this thread's connection sees the open transaction
    return stored is not None and stored.state in (DRAINED, TAKEN)


def _state(gw: Gateway, msg_id: str) -> str | None:
    """The message's state as another connection sees it: committed writes only."""
    with sqlite3.connect(gw.store.path) as db:
        row = db.execute("SELECT state FROM messages WHERE msg_id = ?", (msg_id,)).fetchone()
    return row[0] if row else None


def test_the_waiting_reply_is_taken_in_the_delivery_and_given_after_the_commit(gateway):
    gw, hold = gateway
    me, asked = str(uuid.uuid4()), str(uuid.uuid4())
    waiter = gw.waiters.add(me, asked, claims=1)
    reply = _env(me, "the answer", in_reply_to=asked)
    assert _deliver(gw, hold, reply)
    assert gw.waiters.take_handed(waiter) == []  # not before the commit
    assert _state(gw, reply.msg_id) is None
    assert [envelope for _, _, envelope in gw.burst.commit()] == [reply]  # to ack
    [got] = gw.waiters.take_handed(waiter)
    assert got.envelope.msg_id == reply.msg_id and got.envelope.content == "the answer"
    assert _state(gw, reply.msg_id) == DRAINED
    assert gw.store.seen(reply.msg_id)  # the dedup record is the same row
    assert not _deliver(gw, hold, _env(me, "not a reply"))  # it claims only its reply
    gw.burst.commit()
    gw.waiters.remove(waiter)
    assert gw.store.held_count(me) == 1


def test_a_send_wait_is_preferred_to_a_poll_and_a_peek_or_full_waiter_takes_nothing(gateway):
    gw, hold = gateway
    me, asked = str(uuid.uuid4()), str(uuid.uuid4())
    peek = gw.waiters.add(me, claims=0)
    poll = gw.waiters.add(me, claims=1)
    send = gw.waiters.add(me, asked, claims=1)
    reply, first, second = _env(me, in_reply_to=asked), _env(me, "first"), _env(me, "second")
    for envelope in (reply, first, second):
        _deliver(gw, hold, envelope)
    gw.burst.commit()
    assert [m.envelope.msg_id for m in gw.waiters.take_handed(send)] == [reply.msg_id]
    assert [m.envelope.msg_id for m in gw.waiters.take_handed(poll)] == [first.msg_id]  # its limit is 1
    assert gw.waiters.take_handed(peek) == []
    assert _state(gw, second.msg_id) == HELD
    for waiter in (peek, poll, send):
        gw.waiters.remove(waiter)


def test_a_waiter_gone_before_the_commit_or_before_pickup_puts_its_message_back_on_hold(gateway):
    gw, hold = gateway
    me = str(uuid.uuid4())
    early = gw.waiters.add(me, claims=5)
    gone_before_commit = _env(me, "a")
    assert _deliver(gw, hold, gone_before_commit)
    gw.waiters.remove(early)  # timed out while the burst was open
    gw.burst.commit()
    assert _state(gw, gone_before_commit.msg_id) == HELD

    late = gw.waiters.add(me, claims=5)
    other = gw.waiters.add(me, claims=0)  # told when the message comes back
    gone_after_commit = _env(me, "b")
    assert _deliver(gw, hold, gone_after_commit)
    gw.burst.commit()
    assert not other.event.is_set()
    gw.waiters.remove(late)  # committed and handed, never picked up
    assert _state(gw, gone_after_commit.msg_id) == HELD
    assert other.event.is_set()
    gw.waiters.remove(other)
    assert [m.envelope.content for m in gw.store.drain(me)] == ["a", "b"]


def test_a_rolled_back_burst_hands_nothing_and_frees_the_claim(gateway):
    gw, hold = gateway
    me = str(uuid.uuid4())
    waiter = gw.waiters.add(me, claims=1)
    lost = _env(me, "rolled back")
    assert _deliver(gw, hold, lost)
    gw.burst.rollback()  # as on a lost connection: the broker redelivers it
    assert len(gw.burst) == 0 and gw.waiters.take_handed(waiter) == []
    assert not gw.store.seen(lost.msg_id)
    again = _env(me, "redelivered later")
    assert _deliver(gw, hold, again)  # the claim is free again
    gw.burst.commit()
    assert [m.envelope.content for m in gw.waiters.take_handed(waiter)] == ["redelivered later"]
    gw.waiters.remove(waiter)


def _check_hands_over_only_what_is_committed(gw: Gateway, hold: HoldBackend, commit) -> None:
    """``commit(burst)`` must hand a waiter nothing of a burst whose commit fails (the broker
    redelivers it: handed too, the client would get it twice), and free the claim for the
    redelivery, which it then hands over once committed."""
    me = str(uuid.uuid4())
    waiter = gw.waiters.add(me, claims=1)
    try:
        lost = _env(me, "lost with its commit")
        assert _deliver(gw, hold, lost)
        gw.store.fail_next_commit()
        with pytest.raises(sqlite3.OperationalError):
            commit(gw.burst)
        assert gw.waiters.take_handed(waiter) == [], "a message was handed over before its commit"
        assert _state(gw, lost.msg_id) is None and not gw.store.seen(lost.msg_id)
        assert _deliver(gw, hold, lost)  # redelivered: the claim is free again
        commit(gw.burst)
        assert [m.envelope.msg_id for m in gw.waiters.take_handed(waiter)] == [lost.msg_id]
        assert _state(gw, lost.msg_id) == DRAINED
    finally:
        gw.waiters.remove(waiter)


def _commit_handing_over_first():
    """``Burst.commit`` with its commit and its hand-off swapped (a mutant made from the real
    source, so it follows the method as it changes): what the check above must catch."""
    source = textwrap.dedent(inspect.getsource(Burst.commit))
    commit, give = "tx.commit()", "self._give(handoffs)"
    assert source.count(commit) == 1 and source.count(give) == 1, "Burst.commit changed: update the mutant"
    assert source.index(commit) < source.index(give), "Burst.commit hands over before it commits"
    swapped = source.replace(commit, "\0").replace(give, commit).replace("\0", give)
    namespace: dict = {}
    exec(compile(swapped, inspect.getsourcefile(Burst) or "burst.py", "exec"), vars(burst_mod), namespace)
    return namespace["commit"]


def test_a_burst_whose_commit_fails_hands_nothing_over(gateway):
    gw, hold = gateway
    _check_hands_over_only_what_is_committed(gw, hold, Burst.commit)


def test_handing_over_before_the_commit_is_caught(gateway):
    """The check above fails for a burst that hands over first and commits second."""
    gw, hold = gateway
    with pytest.raises(AssertionError, match="handed over before its commit"):
        _check_hands_over_only_what_is_committed(gw, hold, _commit_handing_over_first())


def _parked(thread: threading.Thread) -> bool:
    """``thread`` is inside ``op_poll``, asleep on its waiter's event (not between looks)."""
    frame = sys._current_frames().get(thread.ident)  # type: ignore[arg-type]
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return bool(names) and names[0] == "wait" and "op_poll" in names


def test_a_draining_poll_returns_handed_and_held_messages_oldest_first(gateway):
    gw, hold = gateway
    me, chatty = str(uuid.uuid4()), str(uuid.uuid4())  # a gid needs no registry entry to poll as
    before = _env(me, "held before the poll")
    hold.deliver(None, before)  # type: ignore[arg-type]
    # the poll drains it at once and returns: the hand-off only serves a poll that waits
    assert [m["content"] for m in op_poll(gw, gid=me, wait=10, limit=10)["messages"]] == [before.content]

    # a poll of chatty's messages only, which times out while the next burst is open
    gone = gw.waiters.add(me, claims=1, peer=chatty)
    answered: dict = {}
    poller = threading.Thread(target=lambda: answered.update(op_poll(gw, gid=me, wait=10, limit=10)))
    poller.start()
    deadline = time.monotonic() + 10
    while not _parked(poller):  # the draining poll found nothing and waits: its next look comes
        assert time.monotonic() < deadline, "the poll never started waiting"  # after the burst
        time.sleep(0.01)
    handed = _env(me, "older, handed at hold time")
    again = _env(me, "newer, held again", sender=chatty)
    assert _deliver(gw, hold, handed)  # the draining poll's: the other wants only chatty's
    assert _deliver(gw, hold, again)  # the chatty-only poll's, registered first
    gw.waiters.remove(gone)
    gw.burst.commit()  # hands "older" to the draining poll; "newer" has no taker: held again
    poller.join(10)
    # unsorted, the drained "newer" would come before the handed "older"
    assert [m["content"] for m in answered["messages"]] == [handed.content, again.content]
    assert [m["msgId"] for m in answered["messages"]] == [handed.msg_id, again.msg_id]
    assert {m["state"] for m in answered["messages"]} == {HELD}  # reported as a drain reports it
    assert list(gw.waiters) == []
    assert _state(gw, handed.msg_id) == DRAINED and _state(gw, again.msg_id) == DRAINED


def test_a_stopping_gateway_holds_instead_of_handing_off(gateway):
    gw, hold = gateway
    me = str(uuid.uuid4())
    waiter = gw.waiters.add(me, claims=5)
    before = _env(me, "claimed, committed at the final flush")
    assert _deliver(gw, hold, before)
    gw.stop()  # SIGTERM: the final flush must not hand it to an API thread that may never answer
    after = _env(me, "arrives while stopping")
    assert not _deliver(gw, hold, after)
    gw.burst.commit()
    assert gw.waiters.take_handed(waiter) == []
    assert [m.envelope.content for m in gw.store.drain(me)] == [before.content, after.content]
    gw.waiters.remove(waiter)


def _taken_at_hold_time(host, msg_id: str) -> bool:
    """The message's row says it was drained in the same write that received it (and then
    confirmed by the client that printed it)."""
    db = Path(host.env["XDG_STATE_HOME"]) / "bridge" / "gateway.db"
    with sqlite3.connect(db) as conn:
        state, received, drained = conn.execute(
            "SELECT state, received, drained FROM messages WHERE msg_id = ?", (msg_id,)
        ).fetchone()
    return state == DRAINED and drained == received


def test_a_waiting_send_and_poll_take_their_messages_at_hold_time(host_factory):
    a, b = host_factory("a"), host_factory("b")
    a.register("main", role="main")
    worker = b.register("worker")
    a.start_gateway(), b.start_gateway()
    poll = subprocess.Popen(
        [BRIDGE_BIN, "poll", "--as", worker, "--wait", "30s", "--json"],
        env=b.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while not any(e["gid"] == worker and e["waiting"] for e in b.bridge_json("status")["entities"]):
        assert time.monotonic() < deadline and poll.poll() is None, poll.stderr.read() if poll.stderr else ""
        time.sleep(0.1)
    send = subprocess.Popen(
        [BRIDGE_BIN, "send", worker, "status?", "--from", "main", "--wait", "30s"],
        env=a.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = poll.communicate(timeout=30)
    assert poll.returncode == 0, err
    [request] = json.loads(out)["messages"]
    assert request["content"] == "status?" and request["state"] == HELD
    reply_id = b.bridge("reply", request["msgId"], "all green", "--from", "worker", check=True).stdout.strip()
    out, err = send.communicate(timeout=30)
    assert send.returncode == 0, err
    assert out.strip() == "all green"
    assert _taken_at_hold_time(b, request["msgId"])  # the waiting poll's
    assert _taken_at_hold_time(a, reply_id)  # the waiting send's
    # taken means gone from the hold: nothing is left for a later poll on either side
    assert a.bridge_json("poll", "--as", "main")["messages"] == []
    assert b.bridge_json("poll", "--as", worker)["messages"] == []
    assert all(e["waiting"] == 0 for e in a.bridge_json("status")["entities"])


class _Recorder:
    """An early answer (``operations.EarlyAnswer``) that records what it was asked to write and
    on which thread, and accepts or refuses it."""

    def __init__(self, accept: bool) -> None:
        self.accept = accept
        self.results: list[dict] = []
        self.threads: list[int] = []

    def answer(self, result: dict) -> bool:
        self.results.append(result)
        self.threads.append(threading.get_ident())
        return self.accept


@pytest.mark.parametrize("accept", [True, False])
def test_a_waiting_poll_is_answered_by_the_thread_that_hands_its_message_over(gateway, monkeypatch, accept):
    from bridgecli.gateway.api import polling

    monkeypatch.setattr(polling, "LOOK_EVERY", 30.0)  # the first wait lasts until the hand-off
    gw, hold = gateway
    me = str(uuid.uuid4())
    early, out = _Recorder(accept), {}
    poller = threading.Thread(
        target=lambda: out.update(op_poll(gw, early=early, gid=me, wait=30, limit=10, confirm=True))
    )
    poller.start()
    deadline = time.monotonic() + 10
    while not _parked(poller):
        assert time.monotonic() < deadline, "the poll never started waiting"
        time.sleep(0.01)
    message = _env(me, "for the poll")
    assert _deliver(gw, hold, message)
    gw.flush_batch()  # commit, hand over and wake, as the I/O thread does
    poller.join(10)
    [written] = early.results
    assert [m["content"] for m in written["messages"]] == ["for the poll"]
    assert written["pending"] == [message.msg_id]
    assert early.threads == [threading.get_ident()]  # written here, not by the poll's thread
    if accept:  # the poll's thread has nothing left to write but what is pending
        assert out == {"answered": True, "pending": [message.msg_id]}
    else:  # refused: the poll's thread answers as before
        assert out["messages"] == written["messages"] and out["pending"] == [message.msg_id]
    assert _state(gw, message.msg_id) == TAKEN and list(gw.waiters) == []


def test_a_socket_answer_too_big_for_the_socket_is_finished_by_the_request_worker():
    import socket

    from bridgecli.gateway.api.connections import Client, SocketAnswer

    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ours.setblocking(False)  # as the local API's loop keeps its client sockets
    client, freed = Client(ours, loop=None), []  # type: ignore[arg-type]  # no loop: nothing is watched
    result = {"messages": [{"content": "x" * 60_000}], "pending": ["m1"]}
    answer = SocketAnswer(client, lambda: freed.append(True))
    assert answer.answer(result)  # a non-blocking write: part of it, the socket is full
    assert not answer.freed and not freed  # the connection stays the request's until the rest is out
    assert client.take_pending() == {"m1"}  # noted before the client could confirm it
    received = bytearray()
    reader = threading.Thread(target=lambda: received.extend(theirs.makefile("rb").readline()))
    reader.start()
    answer.finish()
    reader.join(10)
    assert json.loads(received) == {"ok": True, **result}
    small = SocketAnswer(client, lambda: freed.append(True))
    assert small.answer({"messages": []}) and small.freed and freed == [True]  # all out: free at once
    ours.close()
    gone = SocketAnswer(client, lambda: freed.append(True))
    assert not gone.answer(result)  # a closed connection: nothing written, nothing left to confirm
    assert client.take_pending() == set() and freed == [True]
    theirs.close()
