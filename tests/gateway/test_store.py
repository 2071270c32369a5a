"""The dedup + hold store: pure SQLite logic, no broker."""

from __future__ import annotations

import multiprocessing
import threading
import uuid

from bridgecli.envelope import Envelope
from bridgecli.hoststate.store import DELIVERED, HELD, Store


def _env(to: str, content: str = "x", **kw) -> Envelope:
    return Envelope(kind=kw.pop("kind", "SEND"), sender=str(uuid.uuid4()), recipient=to, content=content, **kw)


def test_record_is_the_dedup_check(tmp_path):
    store = Store(tmp_path / "s.db")
    gid = str(uuid.uuid4())
    env = _env(gid)
    assert store.record(env, HELD) is True
    assert store.record(env, HELD) is False  # the redelivered copy changes nothing
    assert store.seen(env.msg_id)
    assert store.held_count(gid) == 1


def test_drain_is_fifo_and_marks_drained(tmp_path):
    store = Store(tmp_path / "s.db")
    gid = str(uuid.uuid4())
    for i in range(5):
        store.record(_env(gid, f"m{i}"), HELD)
    first = store.drain(gid, limit=3)
    assert [m.envelope.content for m in first] == ["m0", "m1", "m2"]
    assert [m.envelope.content for m in store.drain(gid)] == ["m3", "m4"]
    assert store.drain(gid) == []
    assert store.seen(first[0].envelope.msg_id)  # still deduplicated after draining


def test_take_reply_finds_held_or_delivered_answers(tmp_path):
    store = Store(tmp_path / "s.db")
    gid, asked = str(uuid.uuid4()), str(uuid.uuid4())
    store.record(_env(gid, "unrelated"), HELD)
    store.record(_env(gid, "the answer", kind="REPLY", in_reply_to=asked), HELD)
    got = store.take_reply(gid, asked)
    assert got is not None and got.envelope.content == "the answer"
    assert store.take_reply(gid, asked) is None  # drained once
    assert [m.envelope.content for m in store.drain(gid)] == ["unrelated"]


def test_concurrent_takers_get_each_held_message_once(tmp_path):
    """take_reply and drain look before they lock: two threads racing for the same held
    messages still hand each one out exactly once."""
    import threading

    store = Store(tmp_path / "s.db")
    gid = str(uuid.uuid4())
    asked = [str(uuid.uuid4()) for _ in range(50)]
    for msg_id in asked:
        store.record(_env(gid, msg_id, kind="REPLY", in_reply_to=msg_id), HELD)
    taken: list[str] = []
    start = threading.Barrier(4)

    def replies() -> None:
        start.wait()
        for msg_id in asked:
            found = store.take_reply(gid, msg_id)
            if found is not None:
                taken.append(found.envelope.msg_id)

    def drains() -> None:
        start.wait()
        for _ in range(50):
            taken.extend(m.envelope.msg_id for m in store.drain(gid, limit=2))

    threads = [threading.Thread(target=fn) for fn in (replies, replies, drains, drains)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(taken) == len(set(taken)) == 50
    assert store.held_count(gid) == 0


def test_attempts_survive_reopening(tmp_path):
    path = tmp_path / "s.db"
    assert Store(path).add_attempt("m1", "boom") == 1
    assert Store(path).add_attempt("m1", "boom") == 2
    store = Store(path)
    store.record(_env(str(uuid.uuid4()), msg_id="6d2b6b9e-5a4d-4f41-9c0e-0d1f2a3b4c5d"), DELIVERED)
    store.clear_attempts("m1")
    assert store.add_attempt("m1", "again") == 1


def test_prune_keeps_the_window_and_never_drops_held(tmp_path):
    store = Store(tmp_path / "s.db", dedup_window=10)
    gid = str(uuid.uuid4())
    held = _env(gid, "keep me")
    store.record(held, HELD)
    delivered = [_env(gid, f"d{i}") for i in range(30)]
    for env in delivered:
        store.record(env, DELIVERED)
    store.prune()
    assert store.seen(held.msg_id)
    assert sum(store.seen(e.msg_id) for e in delivered) == 10
    assert all(store.seen(e.msg_id) for e in delivered[-10:])


def _writer(path: str, n: int) -> None:
    store = Store(__import__("pathlib").Path(path))
    gid = "11111111-2222-4333-8444-555555555555"
    for i in range(n):
        store.record(_env(gid, str(i)), HELD)


def test_concurrent_processes_do_not_lose_rows(tmp_path):
    path = tmp_path / "s.db"
    Store(path).close()
    # spawned, not forked: a child forked from a process that has SQLite connections open
    # (pytest's, from earlier tests) inherits SQLite's lock bookkeeping and can lose writes —
    # real writers (the gateway, one-shot commands) are separate programs
    spawn = multiprocessing.get_context("spawn")
    procs = [spawn.Process(target=_writer, args=(str(path), 100)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert Store(path).held_count("11111111-2222-4333-8444-555555555555") == 300


def _fill(store: Store, gid: str, count: int) -> None:
    for i in range(count):
        store.record(_env(gid, f"{i:05d}" + "y" * 1000), DELIVERED)


def test_the_gateway_checkpoints_when_idle_not_inside_a_burst(tmp_path):
    """With the gateway's background checkpointer no commit copies the WAL into the database
    (that fsync stalled deliveries): the checkpointer does, once writes pause. Without it
    SQLite checkpoints inside the commit that crosses its 1,000-page mark."""
    import os
    import time

    gid = str(uuid.uuid4())
    plain = Store(tmp_path / "plain.db")
    _fill(plain, gid, 1000)  # ~20 MB of WAL: past SQLite's 1,000-page autocheckpoint, below WAL_LIMIT
    assert os.path.getsize(tmp_path / "plain.db") > 1_000_000
    plain.close()

    store = Store(tmp_path / "gw.db")  # this thread's connection opens before the checkpointer starts
    store.checkpoint_in_background()
    _fill(store, gid, 1000)
    # writes paused: the checkpointer copies (however long that takes here; pytest-timeout ends a hang)
    while os.path.getsize(tmp_path / "gw.db") < 1_000_000:
        time.sleep(0.05)
    # stop the checkpointer (closing from another thread keeps this thread's connection open):
    # from here on only a commit could copy the WAL, on an old connection or a new one
    closer = threading.Thread(target=store.close)
    closer.start(), closer.join()
    before = os.path.getsize(tmp_path / "gw.db")
    _fill(store, str(uuid.uuid4()), 1000)
    writer = threading.Thread(target=_fill, args=(store, str(uuid.uuid4()), 1000))
    writer.start(), writer.join()
    assert store.size() == 3000
    assert os.path.getsize(tmp_path / "gw.db") == before  # no commit copied anything
    store.close()


def test_a_message_held_again_after_an_unconfirmed_hand_off_is_marked_redelivered(tmp_path):
    from bridgecli.hoststate.store import TAKEN
    from bridgecli.hoststate.wire import message_dict

    store = Store(tmp_path / "s.db")
    gid = str(uuid.uuid4())
    released, recovered, fresh = _env(gid, "a"), _env(gid, "b"), _env(gid, "c")
    for env in (released, recovered, fresh):
        store.record(env, HELD)
    first = store.drain(gid, limit=2, mark=TAKEN)
    assert [m.redelivered for m in first] == [False, False]
    assert store.release([released.msg_id]) == 1  # the client left before its confirm
    assert store.recover_taken() == 1  # the gateway died before it
    again = store.drain(gid)
    assert [(m.envelope.content, m.redelivered) for m in again] == [("a", True), ("b", True), ("c", False)]
    assert [message_dict(m).get("redelivered") for m in again] == [True, True, None]


def test_a_store_made_before_the_redelivered_flag_is_upgraded(tmp_path):
    import sqlite3

    path = tmp_path / "s.db"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE messages (msg_id TEXT PRIMARY KEY, recipient TEXT NOT NULL, sender TEXT NOT NULL,"
        " kind TEXT NOT NULL, in_reply_to TEXT, body TEXT NOT NULL, user_id TEXT, state TEXT NOT NULL,"
        " received REAL NOT NULL, drained REAL)"
    )
    db.close()
    store = Store(path)
    gid = str(uuid.uuid4())
    store.record(_env(gid, "kept"), HELD)
    assert [(m.envelope.content, m.redelivered) for m in store.drain(gid)] == [("kept", False)]
