"""Hand-off at hold time: a message for a local ``send --wait`` / draining ``poll --wait`` is
recorded as taken in the I/O thread's batch and given to the waiter after the commit.

The bookkeeping is checked on a real Gateway object and its real SQLite store, with no broker
(nothing here connects); the end-to-end path through two running gateways is in
``test_a_waiting_send_and_poll_take_their_messages_at_hold_time`` below."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from bridgecli import config as config_mod
from bridgecli.envelope import Envelope
from bridgecli.gateway.daemon import Gateway
from bridgecli.gateway.entities import Registry
from bridgecli.gateway.hold import HoldBackend
from bridgecli.gateway.operations import op_poll
from bridgecli.gateway.store import DRAINED, HELD, Store
from bridgecli.interfaces import BackendContext
from tests.support.env import BRIDGE_BIN


@pytest.fixture
def gateway(tmp_path, monkeypatch):
    for part in ("CONFIG", "STATE", "DATA", "CACHE"):
        monkeypatch.setenv(f"XDG_{part}_HOME", str(tmp_path / part.lower()))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("BRIDGE_HOST_ID", "handoff-test")
    config = config_mod.load()
    store = Store(tmp_path / "state.db")
    gw = Gateway(config, registry=Registry(tmp_path / "entities.db"), store=store)
    hold = HoldBackend(BackendContext(config=config, state_dir=tmp_path, host_id="handoff-test"), store=store)
    yield gw, hold
    store.close()


def _env(to: str, content: str = "x", in_reply_to: str | None = None) -> Envelope:
    return Envelope(kind="REPLY" if in_reply_to else "SEND", sender=str(uuid.uuid4()), recipient=to,
                    content=content, in_reply_to=in_reply_to)


def _deliver(gw: Gateway, hold: HoldBackend, envelope: Envelope) -> bool:
    """What the I/O thread does for an inline hold delivery: inside the batch, then commit."""
    gw.store.begin_batch()
    taken = gw._hand_off(hold, envelope)
    if not taken:
        hold.deliver(None, envelope)  # type: ignore[arg-type]
    return taken


def _commit(gw: Gateway) -> None:
    gw.store.commit_batch()
    if gw._handoffs:
        gw._give_handoffs()


def _state(gw: Gateway, msg_id: str) -> str:
    with sqlite3.connect(gw.store.path) as db:
        return db.execute("SELECT state FROM messages WHERE msg_id = ?", (msg_id,)).fetchone()[0]


def test_the_waiting_reply_is_taken_in_the_delivery_and_given_after_the_commit(gateway):
    gw, hold = gateway
    me, asked = str(uuid.uuid4()), str(uuid.uuid4())
    waiter = gw.add_waiter(me, asked, claims=1)
    reply = _env(me, "the answer", in_reply_to=asked)
    assert _deliver(gw, hold, reply)
    assert gw.take_handed(waiter) == []  # not before the commit
    _commit(gw)
    [got] = gw.take_handed(waiter)
    assert got.envelope.msg_id == reply.msg_id and got.envelope.content == "the answer"
    assert _state(gw, reply.msg_id) == DRAINED
    assert gw.store.seen(reply.msg_id)  # the dedup record is the same row
    assert not _deliver(gw, hold, _env(me, "not a reply"))  # it claims only its reply
    gw.store.commit_batch()
    gw.remove_waiter(waiter)
    assert gw.store.held_count(me) == 1


def test_a_send_wait_is_preferred_to_a_poll_and_a_peek_or_full_waiter_takes_nothing(gateway):
    gw, hold = gateway
    me, asked = str(uuid.uuid4()), str(uuid.uuid4())
    peek = gw.add_waiter(me, claims=0)
    poll = gw.add_waiter(me, claims=1)
    send = gw.add_waiter(me, asked, claims=1)
    reply, first, second = _env(me, in_reply_to=asked), _env(me, "first"), _env(me, "second")
    for envelope in (reply, first, second):
        _deliver(gw, hold, envelope)
    _commit(gw)
    assert [m.envelope.msg_id for m in gw.take_handed(send)] == [reply.msg_id]
    assert [m.envelope.msg_id for m in gw.take_handed(poll)] == [first.msg_id]  # its limit is 1
    assert gw.take_handed(peek) == []
    assert _state(gw, second.msg_id) == HELD
    for waiter in (peek, poll, send):
        gw.remove_waiter(waiter)


def test_a_waiter_gone_before_the_commit_or_before_pickup_puts_its_message_back_on_hold(gateway):
    gw, hold = gateway
    me = str(uuid.uuid4())
    early = gw.add_waiter(me, claims=5)
    gone_before_commit = _env(me, "a")
    assert _deliver(gw, hold, gone_before_commit)
    gw.remove_waiter(early)  # timed out while the batch was open
    _commit(gw)
    assert _state(gw, gone_before_commit.msg_id) == HELD

    late = gw.add_waiter(me, claims=5)
    woken = threading.Event()
    other = gw.add_waiter(me, claims=0)
    other.event = woken  # told when the message comes back
    gone_after_commit = _env(me, "b")
    _deliver(gw, hold, gone_after_commit)
    _commit(gw)
    gw.remove_waiter(late)  # committed and handed, never picked up
    assert _state(gw, gone_after_commit.msg_id) == HELD
    assert woken.is_set()
    gw.remove_waiter(other)
    assert [m.envelope.content for m in gw.store.drain(me)] == ["a", "b"]


def test_a_rolled_back_batch_hands_nothing_and_frees_the_claim(gateway):
    gw, hold = gateway
    me = str(uuid.uuid4())
    waiter = gw.add_waiter(me, claims=1)
    lost = _env(me, "rolled back")
    assert _deliver(gw, hold, lost)
    gw._rollback_batch()  # as on a lost connection: the broker redelivers it
    assert gw._handoffs == [] and gw.take_handed(waiter) == []  # no claim left in the batch
    assert not gw.store.seen(lost.msg_id)
    again = _env(me, "redelivered later")
    assert _deliver(gw, hold, again)  # the claim is free again
    _commit(gw)
    assert [m.envelope.content for m in gw.take_handed(waiter)] == ["redelivered later"]
    gw.remove_waiter(waiter)


def test_a_draining_poll_returns_handed_and_held_messages_oldest_first(gateway):
    gw, hold = gateway
    me = str(uuid.uuid4())  # a gid needs no registry entry to poll as
    older = _env(me, "older, held before the poll")
    hold.deliver(None, older)  # type: ignore[arg-type]

    answered: dict = {}
    poller = threading.Thread(target=lambda: answered.update(op_poll(gw, gid=me, wait=10, limit=10)))
    poller.start()
    # the poll drains "older" at once and returns: the hand-off only serves a poll that waits
    poller.join(10)
    assert [m["content"] for m in answered["messages"]] == ["older, held before the poll"]

    answered.clear()
    poller = threading.Thread(target=lambda: answered.update(op_poll(gw, gid=me, wait=10, limit=10)))
    poller.start()
    deadline = time.monotonic() + 10
    while not gw.waiters:  # the poll found nothing and waits
        assert time.monotonic() < deadline, "the poll never started waiting"
        time.sleep(0.01)
    newer = _env(me, "newer, handed at hold time")
    assert _deliver(gw, hold, newer)
    _commit(gw)
    gw._notify(newer)
    poller.join(10)
    assert [m["content"] for m in answered["messages"]] == ["newer, handed at hold time"]
    assert answered["messages"][0]["state"] == HELD  # reported as a drain reports it
    assert gw.waiters == []


def _taken_at_hold_time(host, msg_id: str) -> bool:
    """The message's row says it was drained in the same write that received it (and then
    confirmed by the client that printed it)."""
    db = Path(host.env["XDG_STATE_HOME"]) / "bridge" / "gateway.db"
    with sqlite3.connect(db) as conn:
        state, received, drained = conn.execute(
            "SELECT state, received, drained FROM messages WHERE msg_id = ?", (msg_id,)).fetchone()
    return state == DRAINED and drained == received


def test_a_waiting_send_and_poll_take_their_messages_at_hold_time(host_factory):
    a, b = host_factory("a"), host_factory("b")
    a.register("main", role="main")
    worker = b.register("worker")
    a.start_gateway(), b.start_gateway()
    poll = subprocess.Popen([BRIDGE_BIN, "poll", "--as", worker, "--wait", "30s", "--json"],
                            env=b.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not any(e["gid"] == worker and e["waiting"] for e in b.bridge_json("status")["entities"]):
        assert time.monotonic() < deadline and poll.poll() is None, poll.stderr.read() if poll.stderr else ""
        time.sleep(0.1)
    send = subprocess.Popen([BRIDGE_BIN, "send", worker, "status?", "--from", "main",
                             "--wait", "30s"], env=a.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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


def test_a_stopping_gateway_holds_instead_of_handing_off(gateway):
    gw, hold = gateway
    me = str(uuid.uuid4())
    waiter = gw.add_waiter(me, claims=5)
    before = _env(me, "claimed, committed at the final flush")
    assert _deliver(gw, hold, before)
    gw.stop()  # SIGTERM: the final flush must not hand it to an API thread that may never answer
    after = _env(me, "arrives while stopping")
    assert not _deliver(gw, hold, after)
    _commit(gw)
    assert gw.take_handed(waiter) == []
    assert [m.envelope.content for m in gw.store.drain(me)] == [before.content, after.content]
    gw.remove_waiter(waiter)
