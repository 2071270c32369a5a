"""The request models: validated once, immutable, and unchanged by a trip over the wire."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridgecli import requests, send_ids
from bridgecli.direct import DirectSession
from bridgecli.errors import ConfigError
from bridgecli.gateway.client import GatewaySession
from bridgecli.requests import PollRequest, RegisterRequest, SendRequest
from bridgecli.session import HostSession


@pytest.mark.parametrize(
    "request_",
    [
        SendRequest(command="send", contents=["hi"], target="bob", wait=3.0, confirm=True, turn="t1"),
        SendRequest(command="reply", contents=["ok"], msg_id="abcdef", sender="me"),
        SendRequest(command="send", contents=["a", "b"], target="bob", bulk=True, delay=2.0),
        SendRequest(command="send", contents=[], target="bob", bulk=True),
        PollRequest(gid="me", wait=1.5, limit=7, peek=True, peer="bob"),
        RegisterRequest(label="w", role="main", deliver="hold"),
    ],
)
def test_a_request_survives_the_wire(request_):
    assert type(request_).from_wire(request_.to_wire()) == request_


def test_the_send_wire_keeps_the_local_api_fields():
    single = SendRequest(command="ask", contents=["why?"], target="bob").to_wire()
    assert single == {"command": "ask", "content": "why?", "target": "bob"}
    bulk = SendRequest(command="send", contents=["a"], target="bob", bulk=True).to_wire()
    assert bulk["contents"] == ["a"] and "content" not in bulk


def test_requests_are_immutable_and_refuse_unknown_fields():
    request = PollRequest(gid="me")
    with pytest.raises(AttributeError):
        request.gid = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        SendRequest.from_wire({"content": "x", "bogus": 1})


@pytest.mark.parametrize(
    "fields",
    [
        {"command": "shout", "contents": ["x"]},
        {"command": "send", "contents": []},
        {"command": "send", "contents": ["a"], "bulk": True, "wait": 5.0},
        {"command": "send", "contents": ["a"], "wait": -1.0},
    ],
)
def test_invalid_send_requests_are_refused_when_built(fields):
    with pytest.raises(ConfigError):
        SendRequest(**fields)


def test_both_sessions_serve_every_operation_of_the_interface():
    wanted = {name for name in vars(HostSession) if not name.startswith("_") or name in ("__enter__", "__exit__")}
    wanted -= {"_is_protocol", "_is_runtime_protocol"}
    for session in (GatewaySession, DirectSession):
        assert all(callable(getattr(session, name, None)) for name in wanted), session


def test_every_operation_has_a_model():
    ops = {cls.OP for cls in vars(requests).values() if isinstance(cls, type) and getattr(cls, "OP", "")}
    assert ops == {
        "send",
        "register",
        "unregister",
        "poll",
        "show",
        "spawn",
        "stop",
        "roster",
        "track",
        "activity",
        "history",
        "thread",
        "channel_join",
        "channel_leave",
        "channel_list",
    }


@pytest.mark.parametrize(
    "fields",
    [
        {"command": "send", "contents": ["a"], "new_id": "not-a-uuid"},
        {"command": "send", "contents": ["a"], "turn": "t" * 257},
    ],
)
def test_the_id_and_turn_of_a_send_are_checked_by_the_model(fields):
    with pytest.raises(ConfigError):
        SendRequest(**fields)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.uuids().map(str),
        st.uuids().map(lambda u: str(u).upper()),
        st.text(alphabet="0123456789abcdefABCDEFg-", max_size=40),
    )
)
def test_the_models_id_check_is_the_envelopes(text):
    from bridgecli.envelope import is_uuid

    assert send_ids.is_uuid(text.lower()) == is_uuid(text.lower())


def _values(**given):
    values = {"target": "bob", "message": "hi", "sender": None, "wait": None, "delay": None, "lines": False}
    values.update({"force": False, "new_id": None, "turn": None, "as_json": False, **given})
    return values


def test_a_command_line_becomes_the_request_it_makes():
    request = SendRequest.from_command_line("send", _values(wait=5.0), lambda: "unused")
    assert request.contents == ("hi",) and request.wait == 5.0 and request.confirm
    piped = SendRequest.from_command_line("send", _values(message="-"), lambda: "from stdin")
    assert piped.contents == ("from stdin",)
    bulk = SendRequest.from_command_line("send", _values(message="-", lines=True), lambda: "one\n\n two\n")
    assert bulk.bulk and bulk.contents == ("one", " two")


@pytest.mark.parametrize(
    "given",
    [{"lines": True}, {"lines": True, "message": "-", "wait": 3.0}, {"lines": True, "message": "-", "new_id": "x"}],
)
def test_a_bulk_command_line_the_model_refuses_is_a_usage_problem_before_stdin_is_read(given):
    from bridgecli.errors import UsageProblem

    def stdin() -> str:
        raise AssertionError("stdin read for a refused command line")

    assert SendRequest.command_line_problem(_values(**given)) is not None
    with pytest.raises(UsageProblem):
        SendRequest.from_command_line("send", _values(**given), stdin)


@pytest.mark.parametrize(
    "build",
    [
        lambda: requests.PollRequest(gid="me", wait=-1.0),
        lambda: requests.PollRequest(gid="me", limit=0),
        lambda: requests.SpawnRequest(profile="p", host="h", wait_ready=-5.0),
    ],
)
def test_poll_and_spawn_refuse_what_no_client_may_ask(build):
    with pytest.raises(ConfigError):
        build()


def test_a_keyed_id_is_the_senders_and_the_keys_alone():
    """The same sender and key give the same id in any process (a UUID5 of both, which the
    envelope accepts); another sender, key or bulk line gives another."""
    from bridgecli.envelope import is_uuid

    me, other = "0d2b9a55-1111-4111-8111-111111111111", "0d2b9a55-2222-4222-8222-222222222222"
    # fixed forever: a rerun after an upgrade must still send the id the first run sent
    assert send_ids.keyed_id(me, "job-42") == "d26d27c6-b782-5a3c-a5f5-49aaf0ae7490"
    ids = {
        send_ids.keyed_id(me, "job-42"),
        send_ids.keyed_id(other, "job-42"),
        send_ids.keyed_id(me, "job-43"),
        send_ids.keyed_id(me, "job-42", 0),
        send_ids.keyed_id(me, "job-42", 1),
    }
    assert len(ids) == 5 and all(is_uuid(i) for i in ids)
    assert send_ids.keyed_id(me.upper(), "job-42") == send_ids.keyed_id(me, "job-42")


@pytest.mark.parametrize("key", ["", "has space", "é", "x" * 129, "tab\t"])
def test_a_bad_key_or_a_key_with_an_id_is_a_usage_problem(key):
    from bridgecli.errors import UsageProblem

    with pytest.raises(UsageProblem, match="--key"):
        SendRequest(target="w", contents=["m"], key=key)
    with pytest.raises(UsageProblem, match="--key and --id"):
        SendRequest(target="w", contents=["m"], key="ok", new_id="0d2b9a55-1111-4111-8111-111111111111")
    assert SendRequest.command_line_problem({"message": "m", "key": key}) is not None


def test_pinning_fixes_the_ids_for_every_try_once():
    """A minted id (fresh only where a reply is waited for), a minted key in bulk; a given id
    or key is kept; a retry is no longer fresh."""
    plain = SendRequest(target="w", contents=["m"]).pinned()
    assert plain.new_id and send_ids.is_uuid(plain.new_id) and not plain.fresh_id and plain.may_be_resent
    waited = SendRequest(target="w", contents=["m"], wait=5.0).pinned()
    assert waited.fresh_id and not waited.may_be_resent and waited.but(fresh_id=False).may_be_resent
    bulk = SendRequest(target="w", contents=["a", "b"], bulk=True).pinned()
    assert bulk.new_id is None and bulk.key and send_ids.key_problem(bulk.key) is None
    keyed = SendRequest(target="w", contents=["m"], key="job-42")
    assert keyed.pinned() is keyed and keyed.may_be_resent
    assert SendRequest(target="w", contents=["m"]).pinned().new_id != plain.new_id
