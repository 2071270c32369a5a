"""The union roster view: pure frame handling and expiry."""

from __future__ import annotations

import json
from types import SimpleNamespace

from bridgecli import roster

E = SimpleNamespace(gid="g1", label="rev", role="agent", backend="tmux", created=1.0)


def _hb(host="a", entity=E, status="idle", interval=5.0):
    return roster.heartbeat_frame(host=host, version="0", interval=interval, entity=entity, status=status)


def test_heartbeats_build_the_view_and_gateways_are_tracked():
    view = roster.RosterView()
    view.apply(_hb(), now=100)
    view.apply(roster.heartbeat_frame(host="a", version="0", interval=5.0, entities=1), now=100)
    [entry] = view.entries()
    assert (entry.gid, entry.label, entry.host, entry.status, entry.backend) == ("g1", "rev", "a", "idle", "tmux")
    assert view.host_alive("a") and not view.host_alive("b")
    assert roster.routing_key("a", "g1") == "roster.a.g1"


def test_gateway_heartbeat_carries_its_start_time():
    view = roster.RosterView()
    view.apply(roster.heartbeat_frame(host="a", version="0", interval=5.0, started=42.5), now=100)
    view.apply(roster.heartbeat_frame(host="b", version="0", interval=5.0), now=100)  # an older gateway
    assert [(g.host, g.started) for g in view.gateways()] == [("a", 42.5), ("b", None)]


def test_expiry_after_missed_intervals_and_refresh():
    view = roster.RosterView(expiry_missed=3)
    view.apply(_hb(), now=100)
    assert view.expire(now=114) == []  # 2.8 intervals
    assert [e.gid for e in view.expire(now=115.1)] == ["g1"]
    view.apply(_hb(), now=120)
    assert view.get("g1") is not None


def test_gone_removes_at_once_and_gateway_gone_removes_its_host():
    view = roster.RosterView()
    view.apply(_hb(host="a"), now=1)
    other = SimpleNamespace(gid="g2", label="x", role="agent", backend="hold", created=1)
    view.apply(_hb(host="b", entity=other), now=1)
    view.apply(roster.gone_frame(host="a", gid="g1", reason="unregistered"), now=2)
    assert [e.gid for e in view.entries()] == ["g2"]
    view.apply(roster.heartbeat_frame(host="b", version="0", interval=5, entities=1), now=2)
    view.apply(roster.gone_frame(host="b", gid=roster.GATEWAY_KEY, reason="stop"), now=3)
    assert view.entries() == [] and not view.host_alive("b")


def test_malformed_frames_are_ignored():
    view = roster.RosterView()
    for junk in (b"", b"{", b"[]", json.dumps({"type": "heartbeat"}).encode(), b"\xff\xfe"):
        view.apply(junk)
    assert view.entries() == []


def test_heartbeat_carries_version_and_since():
    view = roster.RosterView()
    frame = roster.heartbeat_frame(host="a", version="1.2.3", interval=5.0, entity=E, status="idle")
    assert json.loads(frame)["version"] == "1.2.3" and json.loads(frame)["since"] == E.created
    view.apply(frame, now=100)
    [entry] = view.entries()
    assert (entry.version, entry.since, entry.last_seen) == ("1.2.3", 1.0, 100)


def test_a_spawn_answer_enters_the_view_until_heartbeats_take_over():
    view = roster.RosterView(expiry_missed=3)
    handle = {"gid": "g2", "host": "b", "label": "rev2", "role": "agent", "deliver": "tmux:%3"}
    assert view.add_if_absent(roster.spawned_entry(handle, interval=5.0, now=100))
    entry = view.get("g2")
    assert (entry.label, entry.host, entry.backend, entry.status) == ("rev2", "b", "tmux", "unknown")
    view.apply(
        _hb(host="b", entity=SimpleNamespace(gid="g2", label="rev2", role="agent", backend="tmux", created=90.0)),
        now=101,
    )
    # the real heartbeat wins, and a late answer does not overwrite it
    assert not view.add_if_absent(roster.spawned_entry(handle, interval=5.0, now=102))
    assert view.get("g2").status == "idle" and view.get("g2").since == 90.0
    # unheard of after that, it expires like any other entry
    assert [e.gid for e in view.expire(now=101 + 16)] == ["g2"]


def test_a_frame_whose_body_claims_another_host_or_gid_than_its_key_is_ignored():
    """Topic permissions bind a host's user to keys roster.<its host>.*; the body must agree
    with the key, or one host could announce or retire another host's entities."""
    view = roster.RosterView()
    assert view.apply(_hb(host="b"), now=100, key="roster.b.g1")
    forged_here = roster.heartbeat_frame(
        host="b", version="0", interval=5.0, entity=SimpleNamespace(**{**E.__dict__, "gid": "g2"}), status="idle"
    )
    assert not view.apply(forged_here, now=100, key="roster.a.g2")  # host a's key, host b's body
    assert not view.apply(roster.gone_frame(host="b", gid="g1", reason="forged"), now=100, key="roster.a.g1")
    assert not view.apply(_hb(host="b"), now=100, key="")  # not through bridge.roster at all
    assert [e.gid for e in view.entries()] == ["g1"] and view.refused == 3
    assert view.apply(roster.gone_frame(host="b", gid="g1", reason="bye"), now=101, key="roster.b.g1")
    assert view.entries() == []


def test_arrival_key_is_empty_unless_the_frame_came_through_bridge_roster():
    through = SimpleNamespace(exchange="bridge.roster", routing_key="roster.a.g1")
    by_name = SimpleNamespace(exchange="", routing_key="roster.a")
    assert roster.arrival_key(through) == "roster.a.g1" and roster.arrival_key(by_name) == ""
