"""Host frames between real gateways (docs/roster.md): one frame per host per interval, deltas,
sync on join, a fleet mixed with a gateway of the per-entity protocol, hostile frames."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pika

from bridgecli import gids, roster, roster_frames
from bridgecli.gateway.client import GatewayClient

FAST = {"BRIDGE_ROSTER_INTERVAL": "0.5"}
FIXTURE = json.loads((Path(__file__).parent.parent / "data" / "roster_v1_frames.json").read_text())


def _wait_until(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def _socket_roster(host):
    client = GatewayClient.connect(host.socket)
    assert client is not None, f"no gateway on {host.name}"
    with client:
        return client.call("roster")


def _labels(host):
    return {e["label"] for e in _socket_roster(host)["entries"]}


class Tap:
    """A queue bound ``roster.#`` on ``bridge.roster``: every roster frame the broker routes."""

    def __init__(self, uri):
        self.connection = pika.BlockingConnection(pika.URLParameters(uri))
        self.channel = self.connection.channel()
        self.queue = self.channel.queue_declare("", exclusive=True).method.queue
        self.channel.queue_bind(self.queue, "bridge.roster", routing_key="roster.#")
        self.frames: list[tuple[str, dict]] = []

    def drain(self):
        while True:
            method, _props, body = self.channel.basic_get(self.queue, auto_ack=True)
            if method is None:
                return self.frames
            self.frames.append((method.routing_key, json.loads(body)))

    def listen(self, seconds):
        """Drain for ``seconds`` (frames expire after three intervals in the tap too)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.drain()
            time.sleep(0.2)
        return self.drain()

    def of(self, host):
        return [(key, frame) for key, frame in self.drain() if key.startswith(f"roster.{host}.")]

    def close(self):
        self.connection.close()


def test_one_host_frame_per_interval_with_deltas_between_full_frames(host_factory, rabbitmq):
    a, b = host_factory("a", extra_env=FAST), host_factory("b", extra_env=FAST)
    for n in range(3):
        a.register(f"a{n}")
    b.register("b0")
    tap = Tap(rabbitmq.uri)
    try:
        a.start_gateway(), b.start_gateway()
        _wait_until(lambda: _labels(b) == {"a0", "a1", "a2", "b0"})
        tap.drain()
        tap.frames.clear()
        tap.listen(6)  # twelve intervals
        frames = tap.of(a.name)
        # only host frames (no gateway of the old protocol is around), one per interval
        assert {key for key, _ in frames} == {f"roster.{a.name}._gateway"}
        assert {frame["type"] for _, frame in frames} == {"host"}
        assert 6 <= len(frames) <= 12 + 2
        seqs = [frame["seq"] for _, frame in frames]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
        fulls = [frame for _, frame in frames if frame["full"]]
        assert fulls and len(fulls) <= len(frames) // 5 + 1 and len(fulls[0]["entities"]) == 3
        assert all(frame["changed"] == [] and frame["removed"] == [] for _, frame in frames if not frame["full"])
        # a change travels as a delta at once
        late = a.register("late")
        _wait_until(lambda: "late" in _labels(b))
        changed = [item["gid"] for _, frame in tap.of(a.name) for item in frame.get("changed", ())]
        assert late in changed
        row = next(h for h in _socket_roster(b)["hosts"] if h["host"] == a.name)
        assert row["protocol"] == 2 and row["synced"]
    finally:
        tap.close()


def test_a_joining_gateway_has_the_full_view_from_sync_answers_before_anyone_beats_again(host_factory, rabbitmq):
    slow = {"BRIDGE_ROSTER_INTERVAL": "30"}
    a, b = host_factory("a", extra_env=slow), host_factory("b", extra_env=slow)
    for n in range(3):
        a.register(f"a{n}")
    tap = Tap(rabbitmq.uri)
    try:
        a.start_gateway()
        # a's first frame (within 5 s of its connect); its next is due 30 s later
        _wait_until(lambda: any(f["type"] == "host" for _, f in tap.of(a.name)))
        b.start_gateway()
        _wait_until(lambda: {"a0", "a1", "a2"} <= _labels(b), timeout=25)
        # b heard a's entities, yet a broadcast only its first frame: b got them in a's answer
        # to its sync request, sent to b alone
        assert [f["seq"] for _, f in tap.of(a.name) if f["type"] == "host"] == [0]
        assert any(f["type"] == "sync" for _, f in tap.frames if f["host"] == b.name)
        row = next(h for h in _socket_roster(b)["hosts"] if h["host"] == a.name)
        assert row["synced"] and row["seq"] == 0
        assert "sync answers sent 1" in a.bridge_json("status")["extra"]["roster"]
    finally:
        tap.close()


class OldGateway:
    """A gateway of the per-entity protocol, as the fixture's captured frames say it speaks."""

    def __init__(self, uri, interval=0.5):
        self.host = f"old-{uuid.uuid4().hex[:6]}"
        self.gid = gids.mint(self.host)
        self.interval = interval
        self.uri = uri
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def frame(self, name):
        text = FIXTURE[name].replace("{HOST}", self.host).replace("{GID}", self.gid)
        frame = json.loads(text)
        frame["ts"] = time.time()
        return json.dumps(frame, separators=(",", ":")).encode()

    def _run(self):
        connection = pika.BlockingConnection(pika.URLParameters(self.uri))
        channel = connection.channel()
        try:
            while not self.stop.is_set():
                channel.basic_publish("bridge.roster", roster.routing_key(self.host, self.gid), self.frame("entity"))
                channel.basic_publish(
                    "bridge.roster", roster.routing_key(self.host, roster.GATEWAY_KEY), self.frame("gateway")
                )
                self.stop.wait(self.interval)
        finally:
            connection.close()


def test_a_fleet_mixed_with_an_old_gateway_works_both_ways_until_it_leaves(host_factory, rabbitmq):
    a = host_factory("a", extra_env=FAST)
    alpha = a.register("alpha")
    tap = Tap(rabbitmq.uri)
    old = OldGateway(rabbitmq.uri)
    try:
        a.start_gateway()
        old.thread.start()
        _wait_until(lambda: "legacy-rev" in _labels(a))  # old -> new: today's frames taken
        # new -> old: a also sends today's frames for its entities and itself, which an old
        # view takes exactly as before (and its marked _gateway heartbeat)
        sent = _wait_until(lambda: [f for k, f in tap.of(a.name) if k == roster.routing_key(a.name, alpha)])
        old_view = roster.RosterView()
        assert old_view.apply(json.dumps(sent[-1]).encode(), key=roster.routing_key(a.name, alpha))
        assert [e.label for e in old_view.entries()] == ["alpha"]
        assert any(f.get("roster") == roster_frames.PROTOCOL for _, f in tap.frames if f["type"] == "heartbeat")
        assert old.host in a.bridge_json("status")["extra"]["roster"]
        old.stop.set()
        old.thread.join(5)
        # three intervals after it was last heard, a sends host frames only
        _wait_until(lambda: old.host not in a.bridge_json("status")["extra"]["roster"])
        tap.drain()
        tap.frames.clear()
        tap.listen(1.5)
        assert {key for key, _ in tap.of(a.name)} == {f"roster.{a.name}._gateway"}
        assert {f["type"] for _, f in tap.of(a.name)} == {"host"}
    finally:
        old.stop.set()
        tap.close()


def test_hostile_host_frames_are_counted_and_the_rest_of_the_view_stands(host_factory, rabbitmq):
    a, b = host_factory("a", extra_env=FAST), host_factory("b", extra_env=FAST)
    alpha = a.register("alpha")
    b.register("beta")
    a.start_gateway(), b.start_gateway()
    _wait_until(lambda: _labels(a) == {"alpha", "beta"})
    mallory = f"m-{uuid.uuid4().hex[:6]}"
    key = roster.routing_key(mallory, roster.GATEWAY_KEY)

    def frame(seq, full, items, **extra):
        return roster_frames.host_frame(
            host=mallory, version="1", interval=0.5, seq=seq, full=full, items=items, **extra
        )

    def item(gid, label):
        return {"gid": gid, "label": label, "role": "agent", "status": "idle", "backend": "hold", "since": 1.0}

    many = [item(gids.mint(mallory), f"e{n}") for n in range(roster_frames.MAX_HOST_ENTITIES + 1)]
    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq.uri))
    try:
        channel = connection.channel()
        channel.basic_publish("bridge.roster", key, frame(0, True, [item(alpha, "stolen")]))  # a's gid
        channel.basic_publish("bridge.roster", key, frame(1, True, many))  # too many entities
        channel.basic_publish("bridge.roster", key, b"{" + b" " * roster_frames.MAX_FRAME_BYTES + b"}")  # huge
        for seq in range(100, 400, 3):  # gap spam
            channel.basic_publish("bridge.roster", key, frame(seq, False, []))
        channel.basic_publish("bridge.roster", key, frame(9, True, [item(gids.mint(mallory), "sentinel")]))
    finally:
        connection.close()
    _wait_until(lambda: "sentinel" in _labels(a))
    refused = a.bridge_json("status")["extra"]["roster_refused"]
    assert refused["foreign_gid"] >= 1 and refused["too_large"] >= 2
    rows = {e["gid"]: e for e in _socket_roster(a)["entries"]}
    assert (rows[alpha]["label"], rows[alpha]["host"]) == ("alpha", a.name)
    assert _labels(a) == {"alpha", "beta", "sentinel"}
    hosts = {h["host"]: h for h in _socket_roster(a)["hosts"]}
    assert hosts[mallory]["gaps"] >= 1 and hosts[b.name]["synced"]


def test_a_missed_delta_keeps_a_hosts_entries_and_the_next_full_frame_heals(host_factory, rabbitmq):
    a = host_factory("a", extra_env=FAST)
    a.start_gateway()
    sim = f"s-{uuid.uuid4().hex[:6]}"
    keep, drop, new = gids.mint(sim), gids.mint(sim), gids.mint(sim)
    key = roster.routing_key(sim, roster.GATEWAY_KEY)

    def item(gid, label):
        return {"gid": gid, "label": label, "role": "agent", "status": "idle", "backend": "hold", "since": 1.0}

    def frame(seq, full, items, removed=()):
        return roster_frames.host_frame(
            host=sim, version="1", interval=0.5, seq=seq, full=full, items=items, removed=removed
        )

    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq.uri))
    try:
        channel = connection.channel()
        channel.basic_publish("bridge.roster", key, frame(0, True, [item(keep, "keep"), item(drop, "drop")]))
        _wait_until(lambda: _labels(a) == {"keep", "drop"})
        # seq 1 (which removed "drop") is lost; seq 2 adds "new"; then empty deltas for well over
        # the expiry (three intervals): the host is alive, so nothing of it expires
        channel.basic_publish("bridge.roster", key, frame(2, False, [item(new, "new")]))
        for seq in range(3, 10):
            channel.basic_publish("bridge.roster", key, frame(seq, False, []))
            time.sleep(0.5)
        assert _labels(a) == {"keep", "drop", "new"}
        row = next(h for h in _socket_roster(a)["hosts"] if h["host"] == sim)
        assert not row["synced"] and row["gaps"] == 1
        assert f"{sim} " in (note := a.bridge("roster", check=True).stderr) and "UNSYNCED" in note
        channel.basic_publish("bridge.roster", key, frame(10, True, [item(keep, "keep"), item(new, "new")]))
        _wait_until(lambda: _labels(a) == {"keep", "new"})
        assert next(h for h in _socket_roster(a)["hosts"] if h["host"] == sim)["synced"]
    finally:
        connection.close()
