"""The relay's decisions, pure (bridgecli/relay/core.py): what it forwards, what its alive rows
say, how it answers sync requests, and what it refuses. Deliveries are built as pika hands them
over (exchange, routing key, user_id), judged under the sender check as on a hub."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace
from typing import Any

from bridgecli import gids, relay_frames, roster_frames
from bridgecli.gateway.identity import IdentityPolicy
from bridgecli.relay.core import ACTIVE_SECONDS, COLD_SECONDS, RelayCore

T0 = 1_000_000.0
POLICY = IdentityPolicy(mode="host")


def _core(now: float = T0) -> RelayCore:
    return RelayCore("hubrelay", POLICY, clock=lambda: now, jitter=lambda: 0.1)


def _warm_core() -> tuple[RelayCore, float]:
    """A relay fed since T0 by an empty hostw, and the first moment it is warm."""
    core = _core()
    for seq, at in enumerate((T0, T0 + 6, T0 + COLD_SECONDS)):
        _take(core, _host_frame("hostw", [], seq=seq, full=seq == 0), at)
        core.tick(at)
    return core, T0 + COLD_SECONDS + 0.5


def _item(gid: str, label: str, status: str = "idle") -> dict[str, Any]:
    return {"gid": gid, "label": label, "role": "agent", "status": status, "backend": "hold", "since": 1.0}


def _host_frame(host: str, items: list[dict[str, Any]], seq: int = 0, full: bool = True) -> bytes:
    return roster_frames.host_frame(
        host=host, version="9", interval=5.0, seq=seq, full=full, items=items, count=len(items), profiles=["p"]
    )


def _take(core: RelayCore, body: bytes, now: float, gid: str = "_gateway", user: str | None = None) -> bool:
    frame = json.loads(body)
    method = SimpleNamespace(exchange="bridge.roster", routing_key=f"roster.{frame['host']}.{gid}")
    props = SimpleNamespace(user_id=user or frame["host"], headers=None)
    return core.take(method, props, body, now)


def _parsed(frames: list[bytes]) -> list[relay_frames.RelayFrame]:
    parsed = [relay_frames.parse_relay_frame(body) for body in frames]
    assert all(p is not None for p in parsed)
    return [p for p in parsed if p is not None]


def _one(core: RelayCore, now: float) -> relay_frames.RelayFrame:
    frames = _parsed(core.tick(now))
    assert len(frames) == 1
    return frames[0]


def _forwarded_hosts(frame: relay_frames.RelayFrame) -> list[str]:
    return [f["host"] for f in frame.frames if f["type"] == "host"]


def _alive(frame: relay_frames.RelayFrame) -> dict[str, relay_frames.AliveRow]:
    return {row.host: row for row in frame.alive}


def test_a_cold_relay_forwards_no_new_host_but_rows_it_with_its_digest():
    core = _core()
    a1 = gids.mint("hosta")
    assert _take(core, _host_frame("hosta", [_item(a1, "one")]), T0 + 1)
    frame = _one(core, T0 + 1)
    assert frame.relay == "hubrelay" and frame.epoch == core.epoch and not frame.answer
    assert _forwarded_hosts(frame) == []
    row = _alive(frame)["hosta"]
    entries, gateway = core.view.entries("hosta"), core.view.gateways()[0]
    assert row.digest == relay_frames.host_digest(entries, gateway.version, gateway.profiles, gateway.started)
    assert (row.seq, row.interval) == (0, 5.0)


def test_a_known_host_that_changes_is_forwarded_even_while_cold_and_once_only():
    core = _core()
    a1, a2 = gids.mint("hosta"), gids.mint("hosta")
    _take(core, _host_frame("hosta", [_item(a1, "one")]), T0 + 1)
    core.tick(T0 + 1)
    _take(core, _host_frame("hosta", [_item(a2, "two")], seq=1, full=False), T0 + 2)
    frame = _one(core, T0 + 2)
    [full] = frame.frames
    assert (full["host"], full["full"], full["seq"]) == ("hosta", True, 1)
    assert sorted(e["label"] for e in full["entities"]) == ["one", "two"]
    assert full["profiles"] == ["p"] and full["version"] == "9"
    # the same again: a refresh, nothing to forward
    _take(core, _host_frame("hosta", [], seq=2, full=False), T0 + 3)
    assert _one(core, T0 + 3).frames == []


def test_a_warm_relay_forwards_a_new_hosts_first_full_frame():
    core, warm = _warm_core()
    _take(core, _host_frame("hostb", [_item(gids.mint("hostb"), "bee")]), warm)
    assert _forwarded_hosts(_one(core, warm)) == ["hostb"]


def test_the_digest_is_none_while_the_relay_is_not_synced_with_a_host_and_for_old_hosts():
    core = _core()
    b1 = gids.mint("hostb")
    _take(core, _host_frame("hostb", [_item(b1, "bee")], seq=7, full=False), T0 + 1)  # joined mid-stream
    old = roster_frames.heartbeat_frame(host="hostc", version="1", interval=5.0)  # per-entity protocol
    _take(core, old, T0 + 1)
    frame = _one(core, T0 + 1)
    rows = _alive(frame)
    assert rows["hostb"].digest is None and rows["hostb"].seq == 7
    assert rows["hostc"].digest is None
    _take(core, _host_frame("hostb", [_item(b1, "bee")], seq=8), T0 + 2)
    assert _alive(_one(core, T0 + 2))["hostb"].digest is not None


def test_per_entity_and_gone_frames_are_forwarded_as_they_came():
    core = _core()
    c1 = gids.mint("hostc")
    entity = SimpleNamespace(gid=c1, label="cee", role="agent", backend="hold", created=1.0)
    beat = roster_frames.heartbeat_frame(host="hostc", version="1", interval=5.0, entity=entity, status="idle")
    gone = roster_frames.gone_frame(host="hostc", gid=c1, reason="unregistered")
    assert _take(core, beat, T0 + 1, gid=c1)
    assert _take(core, gone, T0 + 1, gid=c1)
    frame = _one(core, T0 + 1)
    assert frame.frames == [json.loads(beat), json.loads(gone)]
    assert _one(core, T0 + 2).frames == []  # given once


def test_a_gone_host_leaves_the_alive_rows_and_comes_back_as_a_new_host():
    core = _core()
    _take(core, _host_frame("hosta", [_item(gids.mint("hosta"), "one")]), T0 + 1)
    core.tick(T0 + 1)
    gone = roster_frames.gone_frame(host="hosta", gid="_gateway", reason="gateway stopped")
    _take(core, gone, T0 + 2)
    frame = _one(core, T0 + 2)
    assert "hosta" not in _alive(frame) and frame.frames == [json.loads(gone)]


def test_a_host_that_stops_and_starts_within_a_tick_is_forwarded_in_arrival_order():
    from bridgecli.roster import RosterView

    core, now = _warm_core()
    old, new = gids.mint("hosta"), gids.mint("hosta")
    _take(core, _host_frame("hosta", [_item(old, "one")]), now)
    first = _one(core, now)
    view = RosterView(policy=POLICY)
    for forwarded in first.frames:
        assert view.apply_forwarded(forwarded, now)
    gone = roster_frames.gone_frame(host="hosta", gid="_gateway", reason="gateway stopped")
    _take(core, gone, now + 0.3)
    _take(core, _host_frame("hosta", [_item(new, "two")]), now + 0.6)  # the restarted gateway
    frame = _one(core, now + 1)
    assert [f["type"] for f in frame.frames] == ["gone", "host"]
    for forwarded in frame.frames:
        view.apply_forwarded(forwarded, now + 1)
    assert [e.gid for e in view.entries("hosta")] == [new]


def test_sync_answers_only_the_asked_hosts_it_is_synced_with():
    core = _core()
    _take(core, _host_frame("hosta", [_item(gids.mint("hosta"), "one")]), T0)
    _take(core, _host_frame("hostb", [_item(gids.mint("hostb"), "bee")]), T0)
    _take(core, _host_frame("hostd", [], seq=4, full=False), T0)  # not synced
    reply = f"reply.hostc.{uuid.uuid4()}"
    ask = roster_frames.sync_frame(host="hostc", reply=reply, hosts=["hostb", "hostd", "nobody"])
    assert _take(core, ask, T0)
    _take(core, ask, T0)  # one pending answer per host
    assert core.due_answers(T0) == []  # jittered
    [(key, frames)] = core.due_answers(T0 + 0.2)
    [answer] = _parsed(frames)
    assert key == reply and answer.answer and answer.last
    assert [(f["host"], f["full"]) for f in answer.frames] == [("hostb", True)]
    assert core.due_answers(T0 + 1) == []


def test_a_whole_view_answer_is_built_once_a_second_and_shared():
    core = _core()
    _take(core, _host_frame("hosta", [_item(gids.mint("hosta"), "one")]), T0)
    keys = [f"reply.{h}.{uuid.uuid4()}" for h in ("hostx", "hosty")]
    for key in keys:
        _take(core, roster_frames.sync_frame(host=key.split(".")[1], reply=key), T0)
    answers = core.due_answers(T0 + 0.5)
    assert [k for k, _ in answers] == keys
    assert answers[0][1] is answers[1][1]
    assert [f["host"] for f in _parsed(answers[0][1])[0].frames] == ["hosta"]
    key = f"reply.hostz.{uuid.uuid4()}"
    _take(core, roster_frames.sync_frame(host="hostz", reply=key), T0 + 2)
    [(_, later)] = core.due_answers(T0 + 3)
    assert later is not answers[0][1]


def test_a_sync_request_for_another_hosts_reply_key_is_refused():
    core = _core()
    ask = roster_frames.sync_frame(host="hostc", reply=f"reply.hosta.{uuid.uuid4()}")
    assert not _take(core, ask, T0)
    assert core.due_answers(T0 + 1) == []
    assert core.view.refused_frames()["key_mismatch"] == 1


def test_refusals_are_counted_and_shown_and_a_foreign_gid_never_forwarded():
    core, now = _warm_core()
    a1 = gids.mint("hosta")
    _take(core, _host_frame("hosta", [_item(a1, "one")]), now)
    assert not _take(core, _host_frame("hosta", [_item(gids.mint("hosta"), "x")]), now, user="hostb")
    # hostb lists hosta's gid as its own: the entity is refused, the rest of the frame taken
    b1 = gids.mint("hostb")
    assert _take(core, _host_frame("hostb", [_item(b1, "bee"), _item(a1, "stolen")]), now)
    dead = SimpleNamespace(user_id="hostb", headers={"x-death": []})
    body = _host_frame("hostb", [])
    assert not core.take(
        SimpleNamespace(exchange="bridge.roster", routing_key="roster.hostb._gateway"), dead, body, now
    )
    frame = _one(core, now)  # warm: both forwarded as they are now
    assert frame.refused["user_mismatch"] == 1 and frame.refused["foreign_gid"] == 1
    assert frame.refused["dead_lettered"] == 1
    forwarded = {f["host"]: [e["gid"] for e in f["entities"]] for f in frame.frames}
    assert forwarded == {"hosta": [a1], "hostb": [b1]}


def test_a_relay_publishes_only_while_it_is_fed():
    core = _core()
    assert core.tick(T0) == []  # a standby: never fed
    _take(core, _host_frame("hosta", []), T0)
    assert core.tick(T0 + 1)
    assert core.tick(T0 + ACTIVE_SECONDS + 1) == []


def test_a_new_epoch_starts_cold_again():
    core = _core()
    before = core.epoch
    assert core.new_epoch(T0 + 30) != before and len(core.epoch) == 12
    assert core.cold(T0 + 31) and not core.cold(T0 + 30 + COLD_SECONDS)


def test_forwarded_frames_over_a_megabyte_are_split():
    core, warm = _warm_core()
    hosts = [f"host{i:02d}" for i in range(12)]
    for host in hosts:
        items = [_item(gids.mint(host), f"{host}-{n}-" + "x" * 100) for n in range(600)]
        assert _take(core, _host_frame(host, items), warm)
    frames = core.tick(warm)
    assert len(frames) >= 2 and all(len(body) < relay_frames.MAX_RELAY_BYTES for body in frames)
    parsed = _parsed(frames)
    assert sorted(h for p in parsed for h in _forwarded_hosts(p)) == hosts
    assert len({p.seq for p in parsed}) == len(parsed)
    assert {row.host for row in parsed[0].alive} == set(hosts)  # hostw was heard before: no row


def test_alive_rows_name_only_the_hosts_heard_since_the_last_frame():
    core = _core()
    _take(core, _host_frame("hosta", []), T0)
    _take(core, _host_frame("hostb", []), T0)
    assert set(_alive(_one(core, T0 + 1))) == {"hosta", "hostb"}
    _take(core, _host_frame("hostb", [], seq=1, full=False), T0 + 1.5)
    assert set(_alive(_one(core, T0 + 2))) == {"hostb"}


def test_the_relay_user_may_publish_only_under_its_own_key_and_hosts_may_only_hear_it():
    import re

    from bridgecli.hub.permissions import for_host, for_relay

    relay, host = for_relay("hub"), for_host("hosta")
    assert re.match(relay.topic_roster_write, "relay.hub") and not re.match(relay.topic_roster_write, "relay.other")
    assert not re.match(relay.topic_roster_write, "roster.hosta._gateway")
    assert re.match(relay.configure, relay_frames.RELAY_QUEUE) and not re.match(relay.configure, "bridge.roster")
    assert not re.match(relay.write, "bridge.msg") and relay.topic_msg_write == "^$"
    assert re.match(relay.topic_control_write, f"reply.hosta.{uuid.uuid4()}") and not re.match(
        relay.topic_control_write, "hosta"
    )
    assert re.match(host.topic_roster_read, "relay.#") and re.match(host.topic_roster_read, "roster.#")
    assert not re.match(host.topic_roster_write, "relay.hub")
    for pattern in (host.configure, host.write, host.read):
        assert not re.match(pattern, relay_frames.RELAY_QUEUE)
