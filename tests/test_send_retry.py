"""The client's retry of a send whose confirm was lost (:func:`bridgecli.sending_client.send`):
same ids on every try, bounded, and never after a refusal. The end-to-end check with a real
lost confirm is ``tests/gateway/test_retry_key.py``; this pins the policy."""

from __future__ import annotations

import pytest

from bridgecli import sending_client
from bridgecli.errors import BrokerUnavailable, Rejected, Unconfirmed
from bridgecli.requests import SendRequest
from bridgecli.results import SendResult


class Session:
    """A host session whose sends fail with ``failures`` in turn, then succeed."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.tried: list[SendRequest] = []

    def send(self, request: SendRequest) -> SendResult:
        self.tried.append(request)
        if self.failures:
            raise self.failures.pop(0)
        return SendResult.from_wire({"msgId": request.new_id, "to": "w", "kind": "SEND"})

    def confirm(self, result: SendResult) -> None:
        pass


def _send(session: Session, **fields) -> SendResult:
    return sending_client.send(session, SendRequest(target="w", contents=["m"], **fields), pause=lambda _: None)


def test_a_lost_confirm_is_tried_again_with_the_same_id():
    lost = Unconfirmed("lost the broker connection before the broker confirmed the message")
    session = Session(lost, BrokerUnavailable("the gateway is not connected to the broker right now"))
    result = _send(session, wait=5.0)
    ids = {request.new_id for request in session.tried}
    assert len(session.tried) == 3 and ids == {result.msg_id}
    assert [request.fresh_id for request in session.tried] == [True, False, False]


def test_a_refusal_is_not_retried_and_an_unreachable_broker_alone_is_not_either():
    with pytest.raises(Rejected):
        _send(session := Session(Unconfirmed("lost"), Rejected("no queue is bound")))
    assert len(session.tried) == 2
    with pytest.raises(BrokerUnavailable):
        _send(session := Session(BrokerUnavailable("cannot reach the broker")))
    assert len(session.tried) == 1


def test_the_tries_are_bounded_and_the_last_error_names_the_safe_rerun():
    session = Session(*[Unconfirmed("lost")] * 10)
    with pytest.raises(Unconfirmed) as raised:
        _send(session, key="job-42")
    assert len(session.tried) == sending_client.ATTEMPTS
    assert {request.key for request in session.tried} == {"job-42"}
    assert "rerun with --key job-42" in str(raised.value)
