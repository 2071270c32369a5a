"""Roster frames speak only for their authenticated host (RosterView, no broker).

A joined host may publish ``roster.<its host>.*`` and nothing else, but it chooses the body,
the gid and every text field, and it can get frames dead-lettered into ``bridge.roster``
under any key. Each test below is one way it could otherwise take over other hosts' entries
or the terminals that print them.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from bridgecli import gids, roster
from bridgecli.gateway.identity import IdentityPolicy
from bridgecli.sanitize import is_inert

CHECK = IdentityPolicy(mode="host", trusted_users=frozenset({"guest"}))


def _entity(gid, label="rev"):
    return SimpleNamespace(gid=gid, label=label, role="agent", backend="hold", created=1.0)


def _hb(host, gid, label="rev", interval=5.0):
    return roster.heartbeat_frame(host=host, version="0", interval=interval, entity=_entity(gid, label), status="idle")


def _apply(view, body, host, gid, user=None, now=100.0):
    """Apply ``body`` as it would arrive through bridge.roster under ``host``'s key."""
    return view.apply(body, now=now, key=roster.routing_key(host, gid), user_id=user)


def _raw(**fields):
    return json.dumps(fields).encode()


# --- the publisher's broker user ---------------------------------------------------------


def test_with_the_check_on_a_frame_counts_only_from_its_hosts_user_or_a_trusted_one():
    view = roster.RosterView(policy=CHECK)
    gid = gids.mint("hub")
    assert not _apply(view, _hb("hub", gid), "hub", gid, user="hostb")  # dead-lettered under hub's key
    assert not _apply(view, _hb("hub", gid), "hub", gid, user=None)  # no user_id proves nothing
    gone = roster.gone_frame(host="hub", gid=roster.GATEWAY_KEY, reason="forged")
    gateway = roster.heartbeat_frame(host="hub", version="0", interval=5.0)
    assert _apply(view, gateway, "hub", roster.GATEWAY_KEY, user="guest")
    assert not _apply(view, gone, "hub", roster.GATEWAY_KEY, user="hostb")  # cannot retire the hub
    assert view.entries() == [] and view.host_alive("hub")
    assert view.refused_frames()[roster.USER_MISMATCH] == 3
    assert _apply(view, _hb("hub", gid), "hub", gid, user="hub")  # the host's own user
    assert _apply(view, _hb("hub", gid, "x"), "hub", gid, user="guest")  # a trusted one
    assert [(e.gid, e.host) for e in view.entries()] == [(gid, "hub")]


def test_with_the_check_off_the_user_is_not_asked():
    view = roster.RosterView(policy=IdentityPolicy())
    gid = gids.mint("a")
    assert _apply(view, _hb("a", gid), "a", gid, user="guest")
    assert view.refused == 0


def test_a_dead_lettered_frame_is_refused_whatever_its_key_and_mode():
    """Dead-lettering republishes under a key the queue's owner chose, unchecked by topic
    permissions: a genuine frame is never dead-lettered."""
    gid = gids.mint("hub")
    method = SimpleNamespace(exchange="bridge.roster", routing_key=roster.routing_key("hub", gid))
    dead = SimpleNamespace(user_id="hostb", headers={"x-death": [{"queue": "q", "reason": "expired"}]})
    for policy in (None, IdentityPolicy(), CHECK):
        view = roster.RosterView(policy=policy)
        assert not view.apply_delivery(method, dead, _hb("hub", gid))
        assert view.entries() == [] and view.refused_frames()[roster.DEAD_LETTERED] == 1
    live = SimpleNamespace(user_id="hub", headers=None)
    assert view.apply_delivery(method, live, _hb("hub", gid)) and view.get(gid).host == "hub"


# --- whose gid ---------------------------------------------------------------------------


def test_a_gid_minted_on_a_known_host_is_refused_from_any_other_host_in_every_mode():
    hub_gid = gids.mint("hub")
    for policy in (None, IdentityPolicy(), CHECK):
        view = roster.RosterView(policy=policy)
        assert _apply(view, _hb("hub", hub_gid, "reviewer"), "hub", hub_gid, user="guest")
        stolen = _hb("hostb", hub_gid, "reviewer")
        assert not _apply(view, stolen, "hostb", hub_gid, user="hostb", now=101)
        assert not _apply(view, roster.gone_frame(host="hostb", gid=hub_gid, reason="x"), "hostb", hub_gid, "hostb")
        assert [(e.label, e.host) for e in view.entries()] == [("reviewer", "hub")]
        assert view.refused_frames()[roster.FOREIGN_GID] == 2


def test_the_local_host_is_known_before_it_is_heard():
    """A gateway's view refuses a claim on its own entities before its first heartbeat."""
    mine = gids.mint("hub")
    view = roster.RosterView(local_host="hub")
    assert not _apply(view, _hb("hostb", mine), "hostb", mine)
    assert view.entries() == [] and view.refused == 1


def test_a_tagged_gid_claimed_first_by_another_host_goes_home_when_its_host_speaks():
    """The claimant was heard first (its host not yet known); the tag is the proof."""
    hub_gid = gids.mint("hub")
    view = roster.RosterView(policy=CHECK)
    assert _apply(view, _hb("hostb", hub_gid, "stolen"), "hostb", hub_gid, user="hostb")
    assert _apply(view, _hb("hub", hub_gid, "reviewer"), "hub", hub_gid, user="guest", now=101)
    assert not _apply(view, _hb("hostb", hub_gid, "stolen"), "hostb", hub_gid, user="hostb", now=102)
    assert [(e.label, e.host) for e in view.entries()] == [("reviewer", "hub")]


def test_with_the_check_on_a_legacy_gid_stays_with_the_host_that_announced_it_first():
    legacy = "0123abcd-0000-4000-8000-000000000000"
    view = roster.RosterView(policy=CHECK)
    assert _apply(view, _hb("a", legacy, "old"), "a", legacy, user="a")
    assert not _apply(view, _hb("b", legacy, "moved"), "b", legacy, user="b", now=101)
    view.expire(now=1000)  # gone from the view, still a's
    assert not _apply(view, _hb("b", legacy, "moved"), "b", legacy, user="b", now=1001)
    assert _apply(view, _hb("a", legacy, "old"), "a", legacy, user="a", now=1002)
    assert [(e.label, e.host) for e in view.entries()] == [("old", "a")]
    assert view.refused_frames()[roster.FOREIGN_GID] == 2


def test_a_gone_frame_retires_only_its_own_hosts_entries():
    legacy = "0123abcd-0000-4000-8000-000000000000"
    view = roster.RosterView()  # check off: no legacy ownership, yet a gone is still scoped
    assert _apply(view, _hb("a", legacy), "a", legacy)
    assert not _apply(view, roster.gone_frame(host="b", gid=legacy, reason="forged"), "b", legacy)
    assert view.get(legacy) is not None and view.refused_frames()[roster.FOREIGN_GID] == 1
    assert _apply(view, roster.gone_frame(host="a", gid=legacy, reason="bye"), "a", legacy)
    assert view.entries() == []


def test_a_host_id_or_gid_with_control_characters_is_refused():
    view = roster.RosterView()
    for host, gid in (("b\x1b[2J", "g1"), ("b", "g\r1"), ("b\n", "g1"), ("b", "g" * 200)):
        body = _raw(type="heartbeat", host=host, gid=gid, label="x", interval=5)
        assert not _apply(view, body, host, gid)
    assert view.entries() == [] and view.refused_frames()[roster.UNSAFE_NAME] == 4


# --- intervals ---------------------------------------------------------------------------


def test_an_announced_interval_is_capped_so_no_entry_can_be_pinned():
    view = roster.RosterView(expiry_missed=3)
    for n, interval in enumerate((1e9, "Infinity", 10**400, -5, "NaN", "soon")):
        gid = gids.mint("b")
        body = _hb("b", gid).replace(b'"interval":5.0', f'"interval":{json.dumps(interval)}'.encode())
        body = body.replace(b'"Infinity"', b"Infinity").replace(b'"NaN"', b"NaN")
        assert _apply(view, body, "b", gid), n
    gateway = _raw(type="heartbeat", host="b", gid="_gateway", interval=1e12, started=float("inf"), entities="x")
    assert _apply(view, gateway, "b", "_gateway")
    assert all(e.interval <= roster.MAX_INTERVAL for e in view.entries())
    [gw] = view.gateways()
    assert gw.interval == roster.MAX_INTERVAL and gw.started is None and gw.entities == 0
    assert view.expire(now=100 + 3 * roster.MAX_INTERVAL + 1) and view.entries() == [] and view.gateways() == []


# --- text --------------------------------------------------------------------------------

HOSTILE = st.text(st.one_of(st.characters(), st.sampled_from("\x1b\x9b\r\n\t\x07\u202e\x00\ud800")), max_size=300)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | HOSTILE,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE, inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(label=HOSTILE, role=HOSTILE, status=HOSTILE, backend=HOSTILE, version=HOSTILE, profiles=st.lists(HOSTILE))
def test_every_text_field_is_made_printable_on_ingest(label, role, status, backend, version, profiles):
    view = roster.RosterView()
    gid = gids.mint("b")
    entity = dict(type="heartbeat", host="b", gid=gid, interval=5)
    entity.update(label=label, role=role, status=status, backend=backend, version=version)
    gateway = dict(type="heartbeat", host="b", gid="_gateway", version=version, profiles=profiles)
    assert _apply(view, json.dumps(entity).encode(), "b", gid)
    assert _apply(view, json.dumps(gateway).encode(), "b", "_gateway")
    [entry], [gw] = view.entries(), view.gateways()
    texts = [entry.label, entry.role, entry.status, entry.backend, entry.version, gw.version, *gw.profiles]
    for text in texts:
        assert is_inert(text) and "\n" not in text and "\t" not in text and len(text) <= roster.MAX_TEXT


@settings(max_examples=300, deadline=None)
@given(
    fields=st.dictionaries(
        st.sampled_from(
            ["type", "host", "gid", "label", "interval", "since", "started", "profiles", "entities", "version"]
        ),
        JSONISH,
    )
)
def test_no_frame_makes_apply_raise(fields):
    view = roster.RosterView(policy=CHECK)
    body = json.dumps(fields, allow_nan=True).encode()
    host, gid = fields.get("host"), fields.get("gid")
    key = roster.routing_key(str(host), str(gid)) if host is not None and gid is not None else None
    view.apply(body, now=1.0, key=key, user_id=str(host))
    view.apply(body, now=1.0)
    for entry in view.entries():
        assert is_inert(entry.label) and math.isfinite(entry.since) and entry.interval <= roster.MAX_INTERVAL


def test_a_spawn_answer_from_another_host_is_sanitised_too():
    entry = roster.spawned_entry(
        {"gid": gids.mint("b"), "host": "b", "label": "x\x1b]0;pwned\x07", "deliver": "tmux\r:%1"}, interval=1e9
    )
    assert is_inert(entry.label) and is_inert(entry.backend) and entry.interval == roster.MAX_INTERVAL


# --- the gateway's side ------------------------------------------------------------------


def test_a_gateway_publishes_its_frames_with_its_broker_user_and_judges_by_its_policy(monkeypatch):
    import threading

    from bridgecli.gateway import presence as presence_mod

    sent = []
    lane = SimpleNamespace(ready=threading.Event(), send_soft=lambda frames: sent.extend(frames) or True)
    values = {"roster.interval": 1.0, "roster.expiry_missed": 3, "security.sender_check": "host"}
    gw = SimpleNamespace(config=SimpleNamespace(values=values), lane=lane, host="hostb")
    monkeypatch.setattr(presence_mod.amqp_conn, "username", lambda config: "hostb")
    p = presence_mod.Presence(gw)
    p.announce_gone(gids.mint("hostb"), "unregistered")
    [(_exchange, key, _body, props)] = sent
    assert key.startswith("roster.hostb.") and props.user_id == "hostb"
    assert p.view.checking  # and the view it keeps asks for the publisher's user
    mine = gids.mint("hostb")
    assert not _apply(p.view, _hb("hostc", mine), "hostc", mine, user="hostc")  # its own host is known
