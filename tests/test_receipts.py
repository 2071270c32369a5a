"""The receipt codec and the sender's ledger: hostile frames are refused item by item, and a
receipt fills only a state its message does not have yet, for the recipient it was sent to."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridgecli import receipts as rc
from bridgecli.envelope import Envelope
from bridgecli.hoststate import ledger as ledger_mod
from bridgecli.hoststate.ledger import Ledger


def _receipt(msg_id: str, to: str, state: str = rc.DELIVERED, **extra) -> rc.Receipt:
    return rc.Receipt(msg_id=msg_id, recipient=to, state=state, at=10.0, **extra)


def test_a_frame_round_trips():
    items = [
        _receipt(str(uuid.uuid4()), str(uuid.uuid4()), how="typed", ref="t1"),
        _receipt(str(uuid.uuid4()), str(uuid.uuid4()), rc.DEAD, reason="delivery_failed: pane gone"),
    ]
    host, decoded = rc.decode(rc.encode("hosta", items))
    assert host == "hosta" and decoded == items


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe",
        b"not json",
        b"[" * 50_000,
        b"[]",
        json.dumps({"v": 2, "host": "a", "receipts": []}).encode(),
        json.dumps({"v": 1, "receipts": []}).encode(),
        json.dumps({"v": 1, "host": "a", "receipts": {}}).encode(),
        json.dumps({"v": 1, "host": "a", "receipts": [{}] * (rc.MAX_ITEMS + 1)}).encode(),
        b" " * (rc.MAX_FRAME_BYTES + 1),
    ],
)
def test_a_frame_that_is_not_one_is_refused_whole(body):
    with pytest.raises(rc.BadReceipt):
        rc.decode(body)


def test_bad_items_are_refused_one_by_one_and_text_is_cut_and_made_inert():
    good = {"msgId": str(uuid.uuid4()), "to": str(uuid.uuid4()), "state": "read", "at": 5, "how": "x\x1b[2J" * 50}
    items = [
        good,
        {**good, "state": "sent"},  # only the sender's own host says sent
        {**good, "msgId": "../../etc"},
        {**good, "at": float("nan")},
        {**good, "at": True},
        {**good, "reason": 7},
        "not an object",
    ]
    _, decoded = rc.decode(json.dumps({"v": 1, "host": "a", "receipts": items}).encode())
    assert isinstance(decoded[0], rc.Receipt)
    assert len(decoded[0].how or "") == rc.MAX_HOW and "\x1b" not in (decoded[0].how or "")
    assert all(isinstance(item, rc.BadReceipt) for item in decoded[1:])


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_any_json_item_is_a_receipt_or_refused(value):
    try:
        rc.from_wire(value)
    except rc.BadReceipt:
        pass


def _sent(ledger: Ledger) -> Envelope:
    envelope = Envelope(kind="SEND", sender=str(uuid.uuid4()), recipient=str(uuid.uuid4()), content="hi")
    ledger.track([envelope])
    ledger.sent(envelope.msg_id, at=1.0)
    return envelope


def test_the_ledger_records_each_state_once_for_its_recipient(tmp_path):
    ledger = Ledger(tmp_path / "receipts.db")
    envelope = _sent(ledger)
    delivered = _receipt(envelope.msg_id, envelope.recipient, how="typed")
    assert ledger.apply(delivered) == ledger_mod.RECORDED
    assert ledger.apply(delivered) == ledger_mod.DUPLICATE
    assert ledger.apply(_receipt(envelope.msg_id, str(uuid.uuid4()), rc.READ)) == ledger_mod.MISMATCH
    assert ledger.apply(_receipt(str(uuid.uuid4()), envelope.recipient)) == ledger_mod.UNKNOWN
    record = ledger.get(envelope.msg_id[:8])
    assert record is not None
    assert record["states"] == {"sent": {"at": 1.0}, "delivered": {"at": 10.0, "how": "typed"}}
    assert (tmp_path / "receipts.db").stat().st_mode & 0o077 == 0  # the owner's only


def test_a_failed_publish_leaves_no_record_and_old_records_are_pruned(tmp_path):
    ledger = Ledger(tmp_path / "receipts.db")
    gone, kept = _sent(ledger), _sent(ledger)
    ledger.forget([gone.msg_id])
    assert ledger.get(gone.msg_id) is None
    assert ledger.prune(keep=3600) == 0 and ledger.get(kept.msg_id) is not None
    assert ledger.prune(keep=-1) == 1 and ledger.get(kept.msg_id) is None


def test_wait_for_wakes_on_the_awaited_state_or_dead_letter(tmp_path):
    ledger = Ledger(tmp_path / "receipts.db")
    envelope = _sent(ledger)
    assert "read" not in (ledger.wait_for(envelope.msg_id, (rc.READ,), timeout=0) or {})["states"]
    got: list[dict] = []
    waiting = threading.Thread(target=lambda: got.append(ledger.wait_for(envelope.msg_id, (rc.READ, rc.DEAD), 30)))
    waiting.start()
    ledger.apply(_receipt(envelope.msg_id, envelope.recipient, rc.DEAD, reason="delivery_failed: gone"))
    waiting.join(30)
    assert not waiting.is_alive()
    assert got[0]["states"]["dead-lettered"]["reason"] == "delivery_failed: gone"


def test_the_ledger_gives_many_records_in_one_go(tmp_path):
    ledger = Ledger(tmp_path / "receipts.db")
    sent = [_sent(ledger) for _ in range(503)]  # more than one query's worth
    ledger.apply(_receipt(sent[0].msg_id, sent[0].recipient))
    unknown = str(uuid.uuid4())
    records = ledger.get_many([m.msg_id for m in sent] + [unknown, sent[1].msg_id])
    assert set(records) == {m.msg_id for m in sent}
    assert set(records[sent[0].msg_id]["states"]) == {rc.SENT, rc.DELIVERED}
    assert records[sent[502].msg_id] == ledger.get(sent[502].msg_id)
    assert ledger.get_many([]) == {}
