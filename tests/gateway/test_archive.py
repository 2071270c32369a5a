"""The message archive (``archive.db``): search, retention, a corrupt file, threads; and its
writer, which never lets a failure reach the caller."""

from __future__ import annotations

import os
import random
import sqlite3
import time
import uuid
from concurrent.futures import Future

import pytest

from bridgecli.envelope import Envelope
from bridgecli.gateway.archive_writer import MAX_QUEUED, ArchiveWriter, row_of
from bridgecli.hoststate.archive import Archive, is_corrupt, match_query

ME, PEER, OTHER = (str(uuid.uuid4()) for _ in range(3))


def _env(content: str, **fields) -> Envelope:
    fields.setdefault("sender", PEER)
    fields.setdefault("recipient", ME)
    fields.setdefault("sender_label", "worker")
    return Envelope(kind=fields.pop("kind", "SEND"), content=content, **fields)


def _add(archive: Archive, *envelopes: Envelope, direction: str = "received", at: float | None = None) -> None:
    now = time.time() if at is None else at
    archive.add([row_of(direction, e.sender if direction == "sent" else e.recipient, e, now) for e in envelopes])


@pytest.fixture
def archive(tmp_path):
    a = Archive(tmp_path / "archive.db")
    yield a
    a.close()


def _ids(messages) -> list[str]:
    return [m["msgId"] for m in messages]


def test_search_finds_words_prefixes_and_labels_newest_first(archive):
    old = _env("please review the deployment plan")
    new = _env("Deployment went fine, thanks")
    other = _env("lunch?", sender=OTHER, sender_label="reviewer-bot")
    _add(archive, old, new, other)
    assert _ids(archive.history(search="deployment")) == [new.msg_id, old.msg_id]
    assert _ids(archive.history(search="deploy*")) == [new.msg_id, old.msg_id]
    assert _ids(archive.history(search="review plan")) == [old.msg_id]  # every word must match
    assert _ids(archive.history(search="reviewer")) == [other.msg_id]  # the sender's label
    assert archive.history(search="deploy") == []  # whole words unless a prefix
    assert _ids(archive.history(search="deployment", limit=1)) == [new.msg_id]
    assert {"msgId", "copyOf", "direction", "owner", "from", "to", "channel", "content", "ts"} <= set(
        archive.history()[0]
    )


@pytest.mark.parametrize(
    "text",
    [
        '"',
        '""',
        "*",
        "**",
        "a*b",
        "NEAR(a b)",
        "a OR b",
        "-x",
        "x -",
        "(",
        ")",
        "col:umn",
        "^a",
        "a AND",
        "\x00",
        "'",
        "\ud800",
        "a\x00b*",
    ],
)
def test_hostile_search_text_is_plain_text_never_a_syntax_error(archive, text):
    _add(archive, _env("a OR b near the col:umn (x)"))
    archive.history(search=text)  # no sqlite3.OperationalError
    assert match_query(text) is None or match_query(text).startswith('"')


def test_filters_by_owner_peer_channel_and_since(archive):
    received = _env("hello there")
    sent = _env("hello back", sender=ME, recipient=PEER)
    chan = _env("hello all", sender=OTHER, recipient=str(uuid.uuid4()), channel="ops")
    _add(archive, received)
    _add(archive, sent, direction="sent")
    archive.add([row_of("received", ME, chan, time.time())])
    _add(archive, _env("hello long ago"), at=time.time() - 3600)
    assert set(_ids(archive.history(owner=ME, search="hello", since=60))) == {
        received.msg_id,
        sent.msg_id,
        chan.msg_id,
    }
    assert set(_ids(archive.history(peer=PEER, since=60))) == {received.msg_id, sent.msg_id}
    assert _ids(archive.history(channel="ops")) == [chan.msg_id]
    assert [m["direction"] for m in archive.history(peer=PEER, since=60)] == ["sent", "received"]


def test_text_sqlite_cannot_store_never_fails_the_batch(archive):
    _add(archive, _env("fine"), _env("lone \ud800 surrogate", sender_label="x\udfff"))
    assert sorted(m["content"] for m in archive.history()) == ["fine", "lone \ufffd surrogate"]


def test_the_same_message_is_archived_once_per_owner_and_direction(archive):
    message = _env("once")
    _add(archive, message)
    _add(archive, message)
    _add(archive, _env("once", msg_id=message.msg_id, sender=ME, recipient=ME), direction="sent")
    assert [m["direction"] for m in archive.history()] == ["sent", "received"]


def test_retention_prunes_by_age_then_by_size(archive):
    _add(archive, _env("ancient"), at=time.time() - 100)
    _add(archive, _env("recent"))
    assert archive.prune(keep_seconds=50, max_bytes=1 << 30) == 1
    assert [m["content"] for m in archive.history()] == ["recent"]
    words = " ".join(f"word{i}" for i in range(150))
    for _ in range(20):
        _add(archive, *(_env(words) for _ in range(50)))
    big = archive.size()
    newest = archive.history(limit=1)[0]["msgId"]
    archive.prune(keep_seconds=3600, max_bytes=big // 3)
    assert 0 < archive.size() <= big // 3
    assert archive.history(limit=1)[0]["msgId"] == newest  # the oldest went first


def test_a_corrupt_file_is_set_aside_and_a_fresh_archive_works(tmp_path):
    path = tmp_path / "archive.db"
    path.write_bytes(b"this is no sqlite database, just bytes " * 200)
    heard = []
    archive = Archive(path, on_set_aside=lambda aside, error: heard.append((aside.name, error)))
    assert archive.set_aside == 1 and len(heard) == 1
    assert heard[0][0].startswith("archive.db.corrupt-") and "not a database" in heard[0][1]
    assert (tmp_path / heard[0][0]).exists()
    _add(archive, _env("after the damage"))
    assert _ids(archive.history(search="damage"))
    assert os.stat(path).st_mode & 0o777 == 0o600
    archive.close()


def test_only_a_damaged_file_counts_as_corrupt(tmp_path):
    db = sqlite3.connect(tmp_path / "x.db")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(a)")
    with pytest.raises(sqlite3.OperationalError) as bad_query:
        db.execute("SELECT * FROM f WHERE f MATCH ?", ("NEAR(",)).fetchall()
    assert not is_corrupt(bad_query.value)
    assert not is_corrupt(sqlite3.OperationalError("database is locked"))
    assert is_corrupt(sqlite3.DatabaseError("database disk image is malformed"))


def test_a_file_damaged_while_open_is_set_aside_at_its_next_use(tmp_path):
    path = tmp_path / "archive.db"
    archive = Archive(path)
    _add(archive, *(_env(f"message {i} " + "x" * 500) for i in range(200)))
    archive.close()
    sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    with open(path, "r+b") as damaged:  # keep the header, wreck the pages after it
        damaged.seek(4096)
        damaged.write(random.Random(0).randbytes(64 * 1024))
    archive = Archive(path)
    archive.history(search="message")
    archive.history(peer=PEER)
    _add(archive, _env("fresh"))
    assert archive.set_aside == 1
    assert [m["content"] for m in archive.history()] == ["fresh"]
    archive.close()


def test_a_thread_is_the_whole_conversation_in_time_order(archive):
    t = time.time()
    root = _env("root?", kind="ASK", ts=t)
    answer = _env("answer", kind="ANSWER", sender=ME, recipient=PEER, in_reply_to=root.msg_id, ts=t + 1)
    follow = _env("follow-up", kind="REPLY", in_reply_to=answer.msg_id, ts=t + 2)
    aside = _env("unrelated", ts=t + 3)
    _add(archive, root, follow, aside)
    _add(archive, answer, direction="sent")
    for start in (root.msg_id, answer.msg_id, follow.msg_id[:8]):
        assert _ids(archive.thread(start)) == [root.msg_id, answer.msg_id, follow.msg_id]
    assert archive.thread(str(uuid.uuid4())) == []


def test_a_channel_copy_is_the_same_message_as_its_original(archive):
    original = _env("who reviews?", sender=ME, recipient=str(uuid.uuid4()), channel="ops")
    _add(archive, original, direction="sent")
    for member in (PEER, OTHER):  # two local members, each with its own copy
        copy = _env(
            original.content,
            msg_id=str(uuid.uuid5(uuid.NAMESPACE_URL, member)),
            sender=ME,
            recipient=original.recipient,
            channel="ops",
            copy_of=original.msg_id,
            ts=original.ts,
        )
        archive.add([row_of("received", member, copy, time.time())])
        reply = _env("me", kind="REPLY", sender=member, recipient=ME, in_reply_to=copy.msg_id, ts=original.ts + 1)
        _add(archive, reply)
    thread = archive.thread(original.msg_id)
    assert [m["content"] for m in thread] == ["who reviews?", "me", "me"]  # the original once
    assert thread[0]["direction"] == "sent"
    assert _ids(archive.thread(copy.msg_id)) == _ids(thread)
    assert len(archive.history(channel="ops")) == 3


def test_the_writer_archives_confirmed_sends_only_and_counts(tmp_path):
    writer = ArchiveWriter(Archive(tmp_path / "archive.db"))
    sent, refused = _env("ok", sender=ME, recipient=PEER), _env("refused", sender=ME, recipient=PEER)
    confirms: list[Future] = [Future(), Future()]
    writer.sent_when_confirmed([sent, refused], confirms)
    confirms[0].set_result(None)
    confirms[1].set_exception(RuntimeError("nack"))
    writer.received([(ME, _env("in"))])
    assert writer.settle()
    assert sorted(m["content"] for m in writer.archive.history()) == ["in", "ok"]
    assert writer.status_line() == "archived 2; failed 0, dropped 0, set aside 0"
    writer.close()


def test_a_failed_write_is_counted_not_raised_and_a_full_queue_drops(tmp_path):
    class Broken(Archive):
        def add(self, rows):
            raise sqlite3.OperationalError("disk I/O error")

    writer = ArchiveWriter(Broken(tmp_path / "archive.db"))
    writer.received([(ME, _env("lost"))])
    assert writer.settle()
    assert writer.counts["failed"] == 1
    writer.close()
    stopped = ArchiveWriter(Archive(tmp_path / "other.db"))
    stopped.close()  # no thread drains it now: the queue fills
    stopped.received([(ME, _env("x"))] * (MAX_QUEUED + 5))
    assert stopped.counts["dropped"] == 5
    off = ArchiveWriter(None)
    off.received([(ME, _env("x"))])
    assert off.status_line() == "off" and off.settle()
