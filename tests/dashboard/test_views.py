"""The dashboard's pure parts: bounded traffic with threads and rates, and a fleet that keeps
what vanished as gone."""

from __future__ import annotations

from bridgecli.dashboard.fleet import FleetTracker
from bridgecli.dashboard.traffic import PREVIEW_CHARS, Rates, Traffic


def _msg(msg_id: str, reply_to: str | None = None, content: str = "x", kind: str = "SEND") -> dict:
    return {"msgId": msg_id, "kind": kind, "from": "f", "to": "t", "inReplyTo": reply_to, "ts": 1.0, "content": content}


def test_traffic_is_bounded_and_batches_the_newest():
    traffic = Traffic(history=5)
    for i in range(8):
        traffic.add(_msg(f"m{i}"), "a", "b")
    assert traffic.get("m2") is None and traffic.get("m3") is not None  # only the newest 5 kept
    rows, last, skipped = traffic.since(0, limit=2)
    assert [r["msgId"] for r in rows] == ["m6", "m7"] and last == 8 and skipped == 6
    assert traffic.since(last) == ([], 8, 0)
    traffic.add(_msg("long", content="é" * (PREVIEW_CHARS + 10)), "a", "b")
    [row], _, _ = traffic.since(last)
    assert len(row["content"]) == PREVIEW_CHARS and row["truncated"] and row["size"] == PREVIEW_CHARS + 10
    assert len(traffic.get("long")["content"]) == PREVIEW_CHARS + 10  # the full text is kept for the detail


def test_thread_follows_in_reply_to_both_ways():
    traffic = Traffic()
    traffic.add(_msg("ask", kind="ASK"), "a", "b")
    traffic.add(_msg("other"), "a", "b")
    traffic.add(_msg("answer", "ask", kind="ANSWER"), "b", "a")
    traffic.add(_msg("thanks", "answer"), "a", "b")
    expected = ["ask", "answer", "thanks"]
    for member in expected:
        assert [r["msgId"] for r in traffic.thread(member)] == expected
    assert [r["msgId"] for r in traffic.thread("other")] == ["other"]
    assert traffic.thread("unknown") == []


def test_rates_count_per_host_and_second():
    now = [1000.2]
    rates = Rates(window=4, clock=lambda: now[0])
    rates.count("a", "sent", 3)
    rates.count("b", "dead")
    now[0] = 1001.5
    rates.count("a", "sent")
    now[0] = 1002.1
    series = rates.series()
    assert series["a"]["sent"] == [0, 0, 3, 1] and series["a"]["delivered"] == [0, 0, 0, 0]
    assert series["b"]["dead"] == [0, 0, 1, 0]
    now[0] = 1010.0
    assert rates.series()["a"]["sent"] == [0, 0, 0, 0]  # older than the window


def test_fleet_keeps_what_vanished_as_gone():
    fleet = FleetTracker()
    gateways = [{"host": "a", "version": "1", "last_seen": 10.0, "started": 4.0, "entities": 1}]
    entity = {
        "gid": "g1",
        "label": "rev",
        "host": "a",
        "role": "agent",
        "backend": "tmux",
        "status": "idle",
        "last_seen": 10.0,
    }
    view = fleet.update(gateways, [entity], None, now=10.0)
    assert [(h["host"], h["uptime"], h["gone"]) for h in view["hosts"]] == [("a", 6, False)]
    assert [(e["label"], e["status"], e["gone"]) for e in view["entities"]] == [("rev", "idle", False)]
    view = fleet.update([], [], None, now=20.0)
    assert [(h["host"], h["gone"], h["goneSince"]) for h in view["hosts"]] == [("a", True, 20.0)]
    assert [(e["label"], e["status"], e["goneSince"]) for e in view["entities"]] == [("rev", "gone", 20.0)]
    view = fleet.update(gateways, [entity], None, now=30.0)  # back again
    assert not view["hosts"][0]["gone"] and view["entities"][0]["status"] == "idle"


def _record(msg_id: str, **states: dict) -> dict:
    return {"msgId": msg_id, "to": "t", "from": "f", "kind": "SEND", "created": 1.0, "states": states}


def test_receipt_cell_shows_the_furthest_state():
    from bridgecli.dashboard.receipt_view import cell, cells, changed

    sent = {"at": 1.0}
    delivered = {"at": 2.0, "how": "held", "ref": "r1"}
    read = {"at": 3.0, "how": "poll"}
    assert cell(_record("m", sent=sent)) == {"state": "sent", "states": {"sent": {"at": 1.0}}}
    shown = cell(_record("m", sent=sent, delivered=delivered))
    assert shown["state"] == "delivered" and shown["detail"] == "held"
    assert shown["states"]["delivered"] == {"at": 2.0, "how": "held"}  # the client's ref is not shown
    assert cell(_record("m", delivered=delivered, read=read))["detail"] == "poll"
    dead = cell(_record("m", sent=sent, delivered=delivered, **{"dead-lettered": {"at": 4.0, "reason": "<b>x</b>"}}))
    assert dead["state"] == "dead-lettered" and dead["detail"] == "<b>x</b>"  # the page writes it as text
    assert cell(_record("m")) is None  # tracked, not confirmed yet: nothing to show
    both = cells([_record("a", sent=sent), _record("b"), _record("c", read=read)])
    assert sorted(both) == ["a", "c"]
    later = dict(both, a=cell(_record("a", sent=sent, delivered=delivered)))
    assert changed(both, later) == {"a": later["a"]}
    assert changed(later, later) == {} and changed({}, both) == both
    assert changed(both, {}) == {}  # a record out of the gateway's window is not withdrawn


def test_channel_view_names_each_channel_and_its_members():
    from bridgecli.channels import channel_gid
    from bridgecli.dashboard.channel_view import channels

    assert channels(None) is None  # no gateway, or one without channel_list
    answer = {
        "channels": [
            {"name": "zeta", "members": []},
            {"name": "Bad Name!", "members": [{"gid": "g", "label": "x", "host": "h"}]},
            {
                "name": "reviewers",
                "members": [{"gid": "g2", "label": "rev2", "host": "b"}, {"gid": "g1", "label": "<b>", "host": "a"}],
            },
        ]
    }
    shown = channels(answer)
    assert [c["name"] for c in shown] == ["reviewers", "zeta"]  # a name that is no channel is skipped
    assert shown[0]["gid"] == channel_gid("reviewers")
    assert [(m["label"], m["host"]) for m in shown[0]["members"]] == [("<b>", "a"), ("rev2", "b")]


def test_history_query_is_bounded_and_rows_are_one_per_message():
    import pytest

    from bridgecli.dashboard.history_view import CONTENT_CHARS, MAX_QUERY, MAX_RESULTS, Refused, request_fields, rows

    assert request_fields({"q": "  deploy  "}) == {"search": "deploy", "limit": MAX_RESULTS}
    assert request_fields({"q": "", "channel": "#ops", "limit": "5000"}) == {"channel": "ops", "limit": MAX_RESULTS}
    assert request_fields({"q": "x" * MAX_QUERY})["search"] == "x" * MAX_QUERY
    for bad in ({"q": "x" * (MAX_QUERY + 1)}, {"channel": "#Not A Channel"}, {"limit": "-1"}, {"limit": "two"}):
        with pytest.raises(Refused):
            request_fields(bad)
    archived = [
        {"msgId": "c2", "copyOf": "m", "direction": "received", "channel": "ops", "content": "y" * (CONTENT_CHARS + 1)},
        {"msgId": "c1", "copyOf": "m", "direction": "received", "channel": "ops", "content": "y"},
        {"msgId": "m", "direction": "sent", "channel": "ops", "content": "y", "ts": "not a time"},
        {"msgId": "n", "direction": "sent", "content": "<img src=x>", "ts": 2.0},
        "not a message",
    ]
    shown = rows(archived)
    assert [(r["msgId"], r["directions"]) for r in shown] == [("c2", ["received", "sent"]), ("n", ["sent"])]
    assert len(shown[0]["content"]) == CONTENT_CHARS and shown[0]["truncated"] and shown[0]["ts"] is None
    assert shown[1]["content"] == "<img src=x>" and shown[1]["ts"] == 2.0  # the page writes it as text
