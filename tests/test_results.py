"""The typed results: attributes read from the local API's answers, which come back unchanged.

``--json`` prints :meth:`to_wire` (less ``pending``), so a result must hand back exactly the
object it was read from, fields it does not model and the answer's ``ok`` included.
"""

from __future__ import annotations

import json

import pytest

from bridgecli import results, sending_client
from bridgecli.direct import DirectSession
from bridgecli.gateway.client import GatewaySession
from bridgecli.session import HostSession

GID, PEER, MSG = "0f8fad5b-d9cb-469f-a165-70867728950e", "7c9e6679-7425-40de-944b-e07fc1f90ae7", "1" * 36
MESSAGE = {
    "msgId": MSG,
    "kind": "REPLY",
    "from": PEER,
    "fromLabel": "worker",
    "fromHost": "hostb",
    "to": GID,
    "inReplyTo": "2" * 36,
    "turn": None,
    "ts": 1790000000.5,
    "content": "done",
    "state": "taken",
}
ENTITY = {"gid": GID, "label": "main", "role": "main", "deliver": "hold", "host": "hosta", "created": 1.0}

ANSWERS = [
    (results.SendResult, {"ok": True, "msgId": MSG, "to": PEER, "kind": "SEND"}),
    (
        results.SendResult,
        {"ok": True, "msgId": MSG, "to": PEER, "kind": "ASK", "reply": MESSAGE, "pending": [MSG], "later": 1},
    ),
    (results.SendResult, {"msgIds": [MSG, GID], "to": PEER, "registered": {"gid": GID, "label": "me@h"}}),
    (results.PollResult, {"ok": True, "gid": GID, "messages": [MESSAGE], "pending": [MSG], "peer": PEER}),
    (results.RegisterResult, {"ok": True, "entity": ENTITY}),
    (results.UnregisterResult, {"ok": True, "entity": {**ENTITY, "launcher": "tmux"}, "dead_lettered": 2}),
    (results.ShowResult, {"ok": True, "message": {**MESSAGE, "user": "bridge-hostb"}}),
    (results.SpawnResult, {"gid": GID, "host": "hostb", "label": "rev", "role": "agent", "deliver": "tmux:%1"}),
    (results.StopResult, {"gid": GID, "host": "hostb", "label": "rev", "process_stopped": True}),
    (
        results.RosterResult,
        {
            "entries": [{"gid": GID, "label": "main", "host": "hosta", "role": "main", "status": "idle"}],
            "gateways": [{"host": "hosta", "profiles": ["coder"], "started": None}],
            "interval": 5.0,
        },
    ),
    (results.RosterResult, {"entries": [], "gateways": [], "interval": None}),
]


@pytest.mark.parametrize(("cls", "answer"), ANSWERS)
def test_a_result_gives_back_the_answer_it_was_read_from(cls, answer):
    result = cls.from_wire(answer)
    assert result.to_wire() == answer and list(result.to_wire()) == list(answer)  # key order too
    assert result.shown() == {k: v for k, v in answer.items() if k != "pending"}
    assert result == cls.from_wire(json.loads(json.dumps(answer)))


def test_results_are_typed_views():
    sent = results.SendResult.from_wire(ANSWERS[1][1])
    assert sent.reply is not None and sent.reply.content == "done" and sent.reply.sender_label == "worker"
    assert sent.pending == (MSG,) and sent.ids == (MSG,) and sent.registered is None
    bulk = results.SendResult.from_wire(ANSWERS[2][1])
    assert bulk.msg_id is None and bulk.ids == (MSG, GID) and bulk.registered.label == "me@h"
    polled = results.PollResult.from_wire(ANSWERS[3][1])
    assert [m.msg_id for m in polled.messages] == [MSG] and polled.peer == PEER
    assert results.UnregisterResult.from_wire(ANSWERS[5][1]).entity.launcher == "tmux"
    assert results.ShowResult.from_wire(ANSWERS[6][1]).message.user == "bridge-hostb"
    roster = results.RosterResult.from_wire(ANSWERS[9][1])
    assert roster.entries[0].label == "main" and roster.gateways[0].profiles == ("coder",)


def test_results_are_immutable():
    result = results.SendResult.from_wire(ANSWERS[0][1])
    with pytest.raises(AttributeError):
        result.msg_id = "other"  # type: ignore[misc]
    result.to_wire()["msgId"] = "changed"
    assert result.to_wire()["msgId"] == MSG


def test_a_send_prints_what_it_printed_as_a_dict():
    """The old printing read the dict; the typed one prints the same bytes."""
    waited = results.SendResult.from_wire(ANSWERS[1][1])
    out, err = sending_client.lines(waited, as_json=True)
    shown = {k: v for k, v in ANSWERS[1][1].items() if k != "pending"}
    assert out == [json.dumps(shown, indent=2, ensure_ascii=False, default=str)] and err == []
    assert sending_client.lines(waited, as_json=False) == (["done"], [f"reply {MSG} from worker"])
    bulk = sending_client.lines(results.SendResult.from_wire(ANSWERS[2][1]), as_json=False)
    assert bulk[0] == [MSG, GID] and "registered now" in bulk[1][0]


def test_both_sessions_return_the_typed_result_of_each_operation():
    for name in ("send", "register", "unregister", "poll", "show", "spawn", "stop", "roster"):
        wanted = getattr(HostSession, name).__annotations__["return"]
        assert isinstance(getattr(results, wanted), type)
        for session in (GatewaySession, DirectSession):
            assert getattr(session, name).__annotations__["return"].rpartition(".")[2] == wanted, (session, name)
