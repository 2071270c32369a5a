"""Host frames (one per gateway per interval, full or delta) in a RosterView, and the sender's
sequence (HostBeats), without a broker; the gateways' side is tested in
tests/gateway/test_host_frames.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from bridgecli import gids, roster, roster_frames
from bridgecli.gateway.host_beats import HostBeats
from bridgecli.gateway.identity import IdentityPolicy

FIXTURE = json.loads((Path(__file__).parent / "data" / "roster_v1_frames.json").read_text())
KEY = roster.routing_key


def _entity(host, label, status_channels=()):
    return SimpleNamespace(
        gid=gids.mint(host), label=label, role="agent", backend="hold", created=1.0, channels=status_channels
    )


def _items(entities, status="idle"):
    return [roster_frames.entity_item(e, status, e.channels) for e in entities]


def _host(view, body, host="a", now=100.0, user=None):
    return view.apply(body, now=now, key=KEY(host, roster.GATEWAY_KEY), user_id=user)


def _labels(view, host="a"):
    return sorted(e.label for e in view.entries(host))


def _state(view, host="a"):
    return next(row for row in view.hosts(now=1e12) if row["host"] == host)


def test_a_full_frame_then_deltas_keep_the_view_and_a_full_frame_is_the_whole_truth():
    beats, view = HostBeats("a", "1", 5.0), roster.RosterView()
    one, two, three = _entity("a", "one", ("ops", "dev", "ops")), _entity("a", "two"), _entity("a", "three")
    assert _host(view, beats.frame(_items([one, two]), profiles=["coder"], started=7.0))
    assert _labels(view) == ["one", "two"] and _state(view)["synced"]
    assert view.get(one.gid).channels == ("dev", "ops")
    [gw] = view.gateways()
    assert gw.profiles == ("coder",) and gw.started == 7.0 and gw.entities == 2
    delta = beats.frame(_items([one, three]))  # two left, three came
    assert json.loads(delta)["full"] is False and len(json.loads(delta)["changed"]) == 1
    assert _host(view, delta, now=101)
    assert _labels(view) == ["one", "three"] and view.gateways()[0].profiles == ("coder",)
    # an unchanged host sends an empty delta, which keeps all its entries alive
    for n in range(3):
        assert _host(view, beats.frame(_items([one, three])), now=110 + 5 * n)
    assert view.expire(now=130) == [] and _labels(view) == ["one", "three"]
    assert b'"full":false' in beats.frame(_items([one])) and beats.seq == 5
    assert b'"full":true' in beats.frame(_items([one]))  # one full frame in every six
    assert [e.label for e in view.expire(now=200)] == ["one", "three"]  # its frames stopped: gone


def test_a_missed_delta_keeps_the_hosts_entries_unconfirmed_until_a_full_frame_heals():
    beats, view = HostBeats("a", "1", 5.0, full_every=100), roster.RosterView()
    one, two, three = _entity("a", "one"), _entity("a", "two"), _entity("a", "three")
    assert _host(view, beats.frame(_items([one, two])))
    beats.frame(_items([one]))  # lost on the way: two left
    for n in range(5):  # far beyond the expiry: the host is still speaking, so nothing expires
        assert _host(view, beats.frame(_items([one, three])), now=105 + 5 * n)
        assert view.expire(now=106 + 5 * n) == []
    assert _labels(view) == ["one", "three", "two"]  # two lingers, three came in the delta
    assert not _state(view)["synced"] and _state(view)["gaps"] == 1
    beats.want_full()
    assert _host(view, beats.frame(_items([one, three])), now=140)
    assert _labels(view) == ["one", "three"] and _state(view)["synced"]


def test_a_sync_answer_counts_only_on_our_reply_key_and_never_rolls_back_a_newer_delta():
    beats, view = HostBeats("a", "1", 5.0), roster.RosterView(local_host="me")
    one, two = _entity("a", "one"), _entity("a", "two")
    ours = "reply.me.00000000-0000-4000-8000-000000000000"
    theirs = "reply.x.00000000-0000-4000-8000-000000000000"
    answer = beats.answer(_items([one]))
    props = SimpleNamespace(user_id="a", headers=None)
    assert not view.apply_delivery(SimpleNamespace(exchange="bridge.ctl", routing_key=theirs), props, answer)
    assert view.apply_delivery(SimpleNamespace(exchange="bridge.ctl", routing_key=ours), props, answer)
    assert _labels(view) == ["one"] and _state(view)["synced"]
    broadcast = SimpleNamespace(exchange="bridge.roster", routing_key=KEY("a", roster.GATEWAY_KEY))
    beats.frame(_items([one]))
    assert view.apply_delivery(broadcast, props, beats.frame(_items([one, two])))  # seq 1 after answer's 0
    assert _state(view)["synced"] and _labels(view) == ["one", "two"]
    late = HostBeats("a", "1", 5.0).answer(_items([one]))  # seq 0, overtaken
    assert view.apply_delivery(SimpleNamespace(exchange="bridge.ctl", routing_key=ours), props, late)
    assert _labels(view) == ["one", "two"]
    delta = beats.frame(_items([one, two]))  # a delta is never taken as an answer
    assert not view.apply_delivery(SimpleNamespace(exchange="bridge.ctl", routing_key=ours), props, delta)


def test_a_sync_request_is_passed_on_only_with_a_reply_key_of_its_own_host():
    asked = []
    view = roster.RosterView(local_host="me", on_sync=lambda host, reply, hosts: asked.append((host, reply)))
    good = "reply.b.00000000-0000-4000-8000-000000000000"
    assert _host(view, roster_frames.sync_frame(host="b", reply=good), host="b")
    assert not _host(view, roster_frames.sync_frame(host="b", reply=good.replace(".b.", ".c.")), host="b")
    mine = good.replace(".b.", ".me.")
    assert _host(view, roster_frames.sync_frame(host="me", reply=mine), host="me")
    assert asked == [("b", good), ("me", mine)] and view.refused_frames()[roster.KEY_MISMATCH] == 1


def test_answers_are_owed_once_per_host_and_jittered_within_half_an_interval():
    beats = HostBeats("a", "1", 10.0)
    assert beats.owe("b", "r1", now=0) and not beats.owe("b", "r2", now=0) and beats.owe("c", "r3", now=0)
    assert beats.due_answers(now=-1) == []
    assert sorted(beats.due_answers(now=5.0)) == ["r1", "r3"] and beats.due_answers(now=6) == []


def test_todays_per_entity_frames_are_taken_as_before_and_mark_an_old_peer():
    gid = gids.mint("old")
    fill = {k: v.replace("{HOST}", "old").replace("{GID}", gid) for k, v in FIXTURE.items() if k != "_comment"}
    view = roster.RosterView(local_host="me")
    assert view.apply(fill["entity"].encode(), now=100, key=KEY("old", gid))
    assert view.apply(fill["gateway"].encode(), now=100, key=KEY("old", roster.GATEWAY_KEY))
    assert [(e.label, e.host, e.status) for e in view.entries()] == [("legacy-rev", "old", "idle")]
    assert view.gateways()[0].profiles == ("coder",) and view.old_peers(within=3, now=102) == ["old"]
    assert _state(view, "old")["protocol"] == 1 and view.old_peers(within=3, now=104) == []
    marked = roster.heartbeat_frame(host="new", version="1", interval=1.0, marked=True)
    assert view.apply(marked, now=104, key=KEY("new", roster.GATEWAY_KEY)) and view.old_peers(3, now=104) == []
    assert view.apply(fill["gone"].encode(), now=105, key=KEY("old", gid)) and view.entries() == []


def test_hostile_host_frames_are_refused_or_trimmed_and_the_rest_of_the_view_stands():
    check = IdentityPolicy(mode="host", trusted_users=frozenset())
    view = roster.RosterView(policy=check, local_host="me")
    honest = _entity("a", "honest")
    assert _host(view, HostBeats("a", "1", 5.0).frame(_items([honest])), user="a")
    mallory = HostBeats("m", "1", 5.0)
    assert not _host(view, mallory.frame(_items([_entity("m", "x")])), host="m", user="a")  # wrong user
    stolen = SimpleNamespace(**{**vars(honest), "label": "stolen"})
    mine = _entity("m", "mine")
    assert _host(view, mallory.frame(_items([stolen, mine])), host="m", user="m")  # foreign gid dropped
    many = [_entity("m", f"e{n}") for n in range(roster_frames.MAX_HOST_ENTITIES + 1)]
    assert not _host(view, mallory.frame(_items(many)), host="m", user="m")
    huge = roster_frames.host_frame(
        host="m", version="x" * roster_frames.MAX_FRAME_BYTES, interval=5, seq=9, full=True, items=[]
    )
    assert not _host(view, huge, host="m", user="m")
    assert not _host(view, mallory.frame(_items([mine])), host="a", user="m")  # under a's key
    for seq in range(50, 500, 7):  # gap spam: only m's own part goes unconfirmed
        body = roster_frames.host_frame(host="m", version="1", interval=1e9, seq=seq, full=False, items=[])
        assert _host(view, body, host="m", user="m")
    refused = view.refused_frames()
    assert refused[roster.USER_MISMATCH] == 1 and refused[roster.FOREIGN_GID] == 1
    assert refused[roster.TOO_LARGE] == 2 and refused[roster.KEY_MISMATCH] == 1
    assert [(e.label, e.host) for e in view.entries()] == [("honest", "a"), ("mine", "m")]
    assert _state(view)["synced"] and not _state(view, "m")["synced"]
    assert all(e.interval <= roster.MAX_INTERVAL for e in view.entries())
