"""Envelope validation: what the gateway accepts off the wire, and what it refuses (pure)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridgecli import envelope
from bridgecli.envelope import Envelope, InvalidEnvelope, parse

A, B, C = (envelope.new_id() for _ in range(3))


def wire(**changes):
    body = Envelope(kind="SEND", sender=A, recipient=B, content="hi").to_wire()
    body.update(changes)
    return {k: v for k, v in body.items() if v is not ...}


def test_round_trip_keeps_every_field():
    env = Envelope(
        kind="REPLY",
        sender=A,
        recipient=B,
        content="ünïcode ✓",
        in_reply_to=C,
        turn="t1",
        sender_label="w1",
        sender_host="hostA",
    )
    back = parse(env.to_bytes())
    assert back == env
    props = env.amqp_properties()
    assert props["message_id"] == env.msg_id and props["correlation_id"] == C
    assert props["delivery_mode"] == 2 and props["type"] == "REPLY"


def test_parse_keeps_the_raw_body_and_the_authenticated_user():
    env = Envelope(kind="SEND", sender=A, recipient=B, content="hi", sender_label="w1")
    body = env.to_bytes()
    back = parse(body, keep_raw=True, user_id="alice")
    assert back.raw == body.decode() and back.user_id == "alice"
    assert back == Envelope(**{**env.as_dict(), "user_id": "alice"})  # raw is not compared
    assert hash(back) == hash(Envelope(**{**env.as_dict(), "user_id": "alice"}))
    with pytest.raises(AttributeError):
        back.content = "changed"  # type: ignore[misc]
    assert parse(body).raw is None and parse(body).user_id is None


def test_ids_are_normalised_to_lower_case():
    body = wire(**{"from": A.upper(), "msgId": C.upper()})
    env = parse(json.dumps(body).encode())
    assert env.sender == A and env.msg_id == C


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"\xff\xfe", "invalid_utf8"),
        (b"{", "bad_json"),
        (b"[1]", "not_an_object"),
        (b"[" * 100000, "bad_json"),
        (json.dumps(wire(v=2)).encode(), "unknown_version"),
        (json.dumps(wire(content=...)).encode(), "missing_field"),
        (json.dumps(wire(kind="SPAM")).encode(), "bad_field"),
        (json.dumps(wire(to="not-a-uuid")).encode(), "bad_field"),
        (json.dumps(wire(content=5)).encode(), "bad_field"),
        (json.dumps(wire(ts="now")).encode(), "bad_field"),
        (json.dumps(wire(ts=True)).encode(), "bad_field"),
        (json.dumps(wire(ts=10**400)).encode(), "bad_field"),
        (json.dumps(wire(ts=float("inf"))).encode(), "bad_field"),
        (json.dumps(wire(ts=float("nan"))).encode(), "bad_field"),
        (json.dumps(wire(kind="REPLY")).encode(), "missing_field"),
        (json.dumps(wire(fromLabel="x" * 257)).encode(), "bad_field"),
        (json.dumps(wire(inReplyTo=7)).encode(), "bad_field"),
    ],
)
def test_invalid_bodies_name_the_reason(body, reason):
    with pytest.raises(InvalidEnvelope) as err:
        parse(body)
    assert err.value.reason == reason
    assert str(err.value).startswith(reason + ":")


def test_size_limits():
    big = json.dumps(wire(content="x" * 11)).encode()
    with pytest.raises(InvalidEnvelope) as err:
        parse(big, max_content_bytes=10)
    assert err.value.reason == "oversize" and "limit is 10" in str(err.value)
    assert parse(big, max_content_bytes=11).content == "x" * 11
    with pytest.raises(InvalidEnvelope, match="ceiling"):
        parse(b" " * (envelope.MAX_BODY_BYTES + 1))
    # multi-byte characters count as bytes, not characters
    with pytest.raises(InvalidEnvelope):
        envelope.check_content_size("é" * 6, 11)


def test_is_uuid():
    assert envelope.is_uuid(A) and envelope.is_uuid(A.upper())
    assert not envelope.is_uuid("1234") and not envelope.is_uuid(None)  # type: ignore[arg-type]
    assert not envelope.is_uuid(A.replace("-", ""))  # only the canonical form


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
field_values = st.one_of(json_values, st.uuids().map(str), st.sampled_from(envelope.KINDS))
near_envelopes = st.fixed_dictionaries(
    {},
    optional={
        key: field_values
        for key in ("v", "msgId", "kind", "from", "to", "ts", "content", "inReplyTo", "turn", "fromLabel", "fromHost")
    },
)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_fuzz_arbitrary_bytes_only_ever_raise_invalid_envelope(body):
    try:
        parse(body)
    except InvalidEnvelope:
        pass


@settings(max_examples=500, deadline=None)
@given(near_envelopes)
def test_fuzz_near_valid_objects_only_ever_raise_invalid_envelope(data):
    data = {**data}
    try:
        env = parse(json.dumps(data).encode(), max_content_bytes=1000)
    except InvalidEnvelope:
        return
    # whatever is accepted is well-formed and survives a round trip
    assert env.kind in envelope.KINDS and envelope.is_uuid(env.recipient)
    assert parse(env.to_bytes()) == env


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(sorted(wire())), field_values | st.sampled_from([10**400, float("inf"), float("nan"), -1.0]))
def test_fuzz_one_bad_field_in_a_valid_body(key, value):
    data = wire()
    data[key] = value
    try:
        env = parse(json.dumps(data).encode())
    except InvalidEnvelope:
        return
    assert parse(env.to_bytes()) == env
