"""Reply addressing from the envelopes the store last handed to local clients: only committed
ones, from memory, and forgotten when the store forgets."""

from __future__ import annotations

import sqlite3
import uuid

import pytest

from bridgecli import messaging
from bridgecli.envelope import Envelope
from bridgecli.errors import NotFound
from bridgecli.hoststate.recent import MAX_CHARS, RecentEnvelopes
from bridgecli.hoststate.store import DELIVERED, DRAINED, HELD, TAKEN, Store


def _env(content: str = "task", to: str | None = None) -> Envelope:
    return Envelope(kind="SEND", sender=str(uuid.uuid4()), recipient=to or str(uuid.uuid4()), content=content)


def _delete_behind_its_back(store: Store, msg_id: str) -> None:
    with sqlite3.connect(store.path) as db:
        db.execute("DELETE FROM messages WHERE msg_id = ?", (msg_id,))


def _remembered(store: Store, env: Envelope) -> bool:
    _delete_behind_its_back(store, env.msg_id)
    try:
        return messaging.original_message(store, env.msg_id.upper()).sender == env.sender
    except NotFound:
        return False


def test_a_message_handed_over_is_addressed_from_memory_once_committed(tmp_path):
    store = Store(tmp_path / "s.db")
    env = _env()
    tx = store.begin()
    store.record(env, TAKEN, tx=tx)
    assert store.recent.get(env.msg_id) is None  # not before the commit
    tx.commit()
    assert _remembered(store, env)


def test_a_drained_message_is_remembered_and_a_held_or_delivered_one_is_not(tmp_path):
    store = Store(tmp_path / "s.db")
    gid = str(uuid.uuid4())
    held, delivered, polled = _env(to=gid), _env(), _env(to=gid)
    store.record(held, HELD)
    store.record(delivered, DELIVERED)
    assert not _remembered(store, held) and not _remembered(store, delivered)
    store.record(polled, HELD)
    assert [m.envelope.msg_id for m in store.drain(gid)] == [polled.msg_id]
    assert _remembered(store, polled)


def test_a_rolled_back_message_is_not_remembered(tmp_path):
    store = Store(tmp_path / "s.db")
    env = _env()
    tx = store.begin()
    store.record(env, DRAINED, tx=tx)
    tx.rollback()
    with pytest.raises(NotFound):
        messaging.original_message(store, env.msg_id)


def test_a_prune_forgets_what_it_deleted(tmp_path):
    store = Store(tmp_path / "s.db", dedup_window=2)
    envs = [_env(f"m{i}") for i in range(4)]
    for env in envs:
        store.record(env, DRAINED)
    assert store.prune() == 2
    with pytest.raises(NotFound):
        messaging.original_message(store, envs[0].msg_id)
    assert messaging.original_message(store, envs[3].msg_id).content == "m3"  # read from the store


def test_memory_stays_bounded():
    recent = RecentEnvelopes(size=3)
    envs = [_env(f"m{i}") for i in range(4)]
    for env in envs:
        recent.add(env)
    assert recent.get(envs[0].msg_id) is None
    assert [recent.get(e.msg_id) for e in envs[1:]] == envs[1:]
    big = _env("x" * (MAX_CHARS + 1))
    recent.add(big)
    assert recent.get(big.msg_id) is None
