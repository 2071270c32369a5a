"""The request models: validated once, immutable, and unchanged by a trip over the wire."""

from __future__ import annotations

import pytest

from bridgecli import requests
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
    assert ops == {"send", "register", "unregister", "poll", "show", "spawn", "stop", "roster"}
