"""Relay frames in a RosterView, without a broker: forwarded frames judged as their hosts' own,
alive rows and digests, hostile relay frames refused, the flood budget, held expiry and the
spawn entry a full frame spares. The gateways' side is tested in tests/relay/."""

from __future__ import annotations

import json
from types import SimpleNamespace

from bridgecli import gids, relay_frames, roster, roster_frames
from bridgecli.amqp import topology
from bridgecli.gateway.host_beats import HostBeats
from bridgecli.gateway.identity import IdentityPolicy
from bridgecli.relay_frames import AliveRow
from bridgecli.roster_relayed import FLOOD_BURST

CHECK = IdentityPolicy(mode="host")
REPLY = "reply.me.12345678-1234-1234-1234-123456789abc"


def _entity(host, label):
    return SimpleNamespace(gid=gids.mint(host), label=label, role="agent", backend="hold", created=1.0, channels=())


def _full(host, entities, seq=0, started=7.0):
    beats = HostBeats(host, "1", 5.0)
    beats.seq = seq - 1
    items = [roster_frames.entity_item(e, "idle") for e in entities]
    return json.loads(beats.frame(items, profiles=["coder"], started=started))


def _relay(frames=(), alive=(), name="r1", epoch="e1", seq=1, refused=None):
    return relay_frames.relay_frame(relay=name, epoch=epoch, seq=seq, frames=frames, alive=alive, refused=refused)


def _deliver(
    view, body, key="relay.r1", user=relay_frames.RELAY_USER, exchange=topology.ROSTER, headers=None, now=100.0
):
    method = SimpleNamespace(exchange=exchange, routing_key=key)
    return view.apply_delivery(method, SimpleNamespace(user_id=user, headers=headers), body, now=now)


def _labels(view, host=None):
    return sorted(e.label for e in view.entries(host))


def _view(**kwargs):
    return roster.RosterView(local_host="me", **kwargs)


def test_forwarded_frames_fill_the_view_and_alive_rows_keep_it_and_name_the_wanted_hosts():
    epochs = []
    view = _view(on_epoch=lambda relay, epoch: epochs.append((relay, epoch)))
    one, two = _entity("a", "one"), _entity("b", "two")
    assert _deliver(view, _relay([_full("a", [one]), _full("b", [two])], refused={"foreign_gid": 3}))
    assert _labels(view) == ["one", "two"] and epochs == [("r1", "e1")]
    assert view.relay.info(now=100.4)["age"] == 0.4 and view.relay.info()["refused"] == {"foreign_gid": 3}
    # alive rows refresh both hosts: nothing expires while the relay says they live
    same = [AliveRow("a", 3, view.host_digest("a"), 5.0), AliveRow("b", 3, None, 5.0)]
    for n in range(1, 10):
        assert _deliver(view, _relay(alive=same, seq=n), now=100.0 + 5 * n)
    assert view.expire(now=150) == [] and view.relay.take_wanted() == []
    # a digest other than ours: the host is wanted, once; the answer's full frame heals it
    three = _entity("a", "three")
    elsewhere = _view()
    assert _deliver(elsewhere, _relay([_full("a", [three], seq=9)]))
    changed = elsewhere.host_digest("a")
    assert _deliver(view, _relay(alive=[AliveRow("a", 9, changed, 5.0)], seq=11), now=151)
    assert view.relay.take_wanted() == ["a"] and view.relay.take_wanted() == []
    answer = relay_frames.answer_frames(relay="r1", epoch="e1", seq=12, frames=[_full("a", [three], seq=9)])
    assert _deliver(view, answer[0], key=REPLY, exchange=topology.CONTROL, now=152)
    assert _labels(view, "a") == ["three"] and view.host_digest("a") == changed
    # a new epoch (a relay took over) is announced once
    assert _deliver(view, _relay(epoch="e2", seq=1), now=153) and epochs[-1] == ("r1", "e2")


def test_hostile_relay_frames_are_refused_and_counted():
    view = _view(policy=CHECK)
    one = _entity("a", "one")
    body = _relay([_full("a", [one])])
    assert not _deliver(view, body, user="a")  # a host's user under the sender check
    assert not _deliver(view, body, key="relay.r2")  # the key names another relay
    assert not _deliver(view, body, headers={"x-death": []})  # dead-lettered into bridge.roster
    other = "reply.b.12345678-1234-1234-1234-123456789abc"
    assert not _deliver(view, body, key=other, exchange=topology.CONTROL)  # another host's reply key
    assert not _deliver(view, body, key="relay.r1", exchange="")  # pushed into the queue by name: ignored
    big = _relay([{"pad": "x" * (relay_frames.MAX_RELAY_BYTES + 1)}])
    assert not _deliver(view, big)
    refused = view.refused_frames()
    assert refused["user_mismatch"] == 1 and refused["key_mismatch"] == 2 and refused["dead_lettered"] == 1
    assert refused["too_large"] == 1 and view.entries() == []
    # a forwarded frame naming another host's gids, a sync request smuggled in, too many entities
    b_gid = _entity("b", "bee").gid
    assert _deliver(view, _relay([_full("b", [SimpleNamespace(**{**one.__dict__, "gid": b_gid, "label": "bee"})])]))
    foreign = _full("a", [one])
    foreign["entities"].append({**foreign["entities"][0], "gid": b_gid, "label": "stolen"})
    sync = json.loads(roster_frames.sync_frame(host="a", reply="reply.a.12345678-1234-1234-1234-123456789abc"))
    huge = _full("c", [])
    huge["entities"] = [{"gid": f"c{n}", "label": "x"} for n in range(roster_frames.MAX_HOST_ENTITIES + 1)]
    asked = []
    view.on_sync = lambda *args: asked.append(args)
    assert _deliver(view, _relay([foreign, sync, huge]))
    refused = view.refused_frames()
    assert refused["foreign_gid"] == 1 and refused["key_mismatch"] == 3 and refused["too_large"] == 2
    assert asked == [] and _labels(view) == ["bee", "one"] and view.owner(b_gid) == "b"
    # the trusted user may relay under the check
    trusted = _view(policy=IdentityPolicy(mode="host", trusted_users=frozenset({"ops"})))
    assert _deliver(trusted, body, user="ops") and _labels(trusted) == ["one"]


def test_a_flooding_sender_is_refused_while_another_host_stands():
    view = _view()
    beats = {h: HostBeats(h, "1", 5.0) for h in ("a", "b")}
    one = _entity("b", "one")
    assert _deliver(view, beats["b"].frame([roster_frames.entity_item(one, "idle")]), key="roster.b._gateway", user="b")
    taken = sum(_deliver(view, beats["a"].frame([]), key="roster.a._gateway", user="a", now=200.0) for _ in range(1500))
    assert taken == int(FLOOD_BURST) and view.refused_frames()["flooded"] == 1500 - taken
    assert _deliver(
        view, beats["b"].frame([roster_frames.entity_item(one, "idle")]), key="roster.b._gateway", user="b", now=200.0
    )
    assert _labels(view) == ["one"]
    # relay frames are exempt; the budget refills
    assert all(_deliver(view, _relay(seq=n), now=200.0) for n in range(20))
    assert _deliver(view, beats["a"].frame([]), key="roster.a._gateway", user="a", now=201.0)


def test_no_expiry_while_held_and_a_spawn_entry_outlives_a_full_frame_that_lacks_it():
    view = _view()
    one = _entity("a", "one")
    assert _deliver(view, _relay([_full("a", [one])]), now=100.0)
    view.hold_expiry(until=200.0)
    assert view.expire(now=199.0) == [] and _labels(view) == ["one"]
    assert [e.label for e in view.expire(now=201.0)] == ["one"]
    spawned = roster.spawned_entry({"gid": gids.mint("a"), "host": "a", "label": "new"}, interval=5.0, now=300.0)
    assert view.add_if_absent(spawned)
    assert _deliver(view, _relay([_full("a", [one], seq=5)]), now=301.0)
    assert _labels(view) == ["new", "one"]  # the relay had not heard the host's delta yet
    assert _deliver(view, _relay([_full("a", [one], seq=6)]), now=311.0)
    assert _labels(view) == ["one"]  # two intervals on, a full frame is the host's whole truth
