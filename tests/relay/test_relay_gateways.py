"""Real gateways and a real ``bridge relay`` on the session broker (docs/roster.md#the-roster-relay):
gateways fed by the relay alone unbind ``roster.#``; an ``only`` joiner never binds it; with
the relay stopped they hear every host again without losing an entry; a listener that
reconnects while relay-fed asks no whole view."""

from __future__ import annotations

import json
from pathlib import Path

import pika

from tests.multihost.helpers import wait_for as _until
from tests.support.hosts import Host
from tests.support.relay import Relay

FAST = {"BRIDGE_ROSTER_INTERVAL": "1"}


def _serving(relay: Relay) -> Relay:
    _until(relay.serving, what=f"relay {relay.name} serving")
    return relay


def _roster(host: Host) -> dict:
    return host.bridge_json("roster")


def _labels(host: Host) -> set[str]:
    return {e["label"] for e in _roster(host)["entries"]}


def _fed_by(host: Host, relay: str) -> bool:
    return (_roster(host).get("relay") or {}).get("feed") == f"relay {relay}"


def _bindings(rabbitmq, host: Host) -> set[str]:
    """The routing keys ``roster.<host>`` is bound with on ``bridge.roster``."""
    out = rabbitmq.ctl(
        "list_bindings", "-q", "--no-table-headers", "source_name", "destination_name", "routing_key"
    ).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    return {r[2] for r in rows if len(r) == 3 and r[0] == "bridge.roster" and r[1] == f"roster.{host.name}"}


def _start(host_factory, name: str, labels: list[str], **env: str) -> Host:
    host = host_factory(name, extra_env={**FAST, **env})
    for label in labels:
        host.register(label)
    host.start_gateway()
    return host


def test_gateways_fed_by_the_relay_alone_and_back_to_every_host_when_it_stops(host_factory, rabbitmq):
    relay = _serving(Relay(host_factory("relay"), "r1"))
    try:
        hosts = [_start(host_factory, n, [f"{n}1", f"{n}2"]) for n in ("a", "b", "c")]
        everyone = {f"{n}{i}" for n in ("a", "b", "c") for i in (1, 2)}
        for host in hosts:
            _until(lambda h=host: _labels(h) == everyone, what=f"{host.name} hears everyone")
            _until(lambda h=host: _fed_by(h, "r1"), what=f"{host.name} fed by the relay")
            _until(lambda h=host: _bindings(rabbitmq, h) == {"relay.#"}, what=f"{host.name} unbinds roster.#")
        # a change travels through the relay alone
        hosts[0].register("a3")
        for host in hosts:
            _until(lambda h=host: "a3" in _labels(h), what=f"{host.name} hears a3 through the relay")
        # an `only` joiner never binds roster.# and fills its view from the relay
        joiner = host_factory("d", extra_env={**FAST, "BRIDGE_ROSTER_RELAY": "only"})
        joiner.register("d1")
        joiner.start_gateway()
        seen: set[str] = set()

        def joined() -> bool:
            seen.update(_bindings(rabbitmq, joiner))
            return _labels(joiner) >= everyone | {"a3", "d1"}

        _until(joined, what="the only joiner hears everyone")
        assert seen == {"relay.#"}
        for host in hosts:
            _until(lambda h=host: "d1" in _labels(h), what=f"{host.name} hears the joiner")
        status = hosts[1].bridge_json("status")
        assert status["extra"]["roster_relay"]["relay"] == "r1"
        shown = hosts[1].bridge("roster", check=True)
        assert "heard through: roster relay r1, heard " in shown.stdout + shown.stderr
    finally:
        relay.end()
    # the relay is gone: auto gateways hear every host directly again, nothing lost
    for host in hosts:
        _until(lambda h=host: "roster.#" in _bindings(rabbitmq, h), what=f"{host.name} binds roster.# again")
        _until(lambda h=host: not _fed_by(h, "r1"), what=f"{host.name} no longer relay-fed")
    host_c = hosts[2]
    hosts[0].register("a4")
    _until(lambda: {"a3", "a4", "b1", "d1"} <= _labels(host_c), what="c hears a4 directly")
    assert _labels(host_c) >= everyone


def test_a_listener_reconnect_while_relay_fed_asks_no_whole_view(host_factory, rabbitmq):
    relay = _serving(Relay(host_factory("relay"), "r2"))
    try:
        a, b = _start(host_factory, "a", ["a1"]), _start(host_factory, "b", ["b1"])
        for host in (a, b):
            _until(lambda h=host: _fed_by(h, "r2") and _labels(h) == {"a1", "b1"}, what=f"{host.name} relay-fed")
        tap = pika.BlockingConnection(pika.URLParameters(rabbitmq.uri))
        try:
            channel = tap.channel()
            queue = channel.queue_declare("", exclusive=True).method.queue
            channel.queue_bind(queue, "bridge.roster", routing_key=f"roster.{a.name}._gateway")
            name = f"bridge-gateway-{a.name}-roster"
            out = rabbitmq.ctl("list_connections", "-q", "--no-table-headers", "pid", "client_properties").stdout
            rows = out.splitlines()
            pids = [row.split("\t")[0] for row in rows if name in row]
            assert len(pids) == 1, rows
            rabbitmq.ctl("close_connection", pids[0], "test: listener reconnect")
            _until(lambda: len(_reconnected(a)) >= 1, what="the listener reconnects")
            _until(lambda: _fed_by(a, "r2") and _labels(a) == {"a1", "b1"}, what="a relay-fed again")
            b.register("b2")
            _until(lambda: "b2" in _labels(a), what="a hears b2 after its reconnect")
            whole = []
            while True:
                method, _props, body = channel.basic_get(queue, auto_ack=True)
                if method is None:
                    break
                frame = json.loads(body)
                if frame.get("type") == "sync" and "hosts" not in frame:
                    whole.append(frame)
            assert whole == []
            assert _bindings(rabbitmq, a) == {"relay.#"}
        finally:
            tap.close()
    finally:
        relay.end()


def _reconnected(host: Host) -> list[str]:
    return [line for line in host.whole_log().splitlines() if "roster connection lost" in line]


def test_a_broker_that_refuses_relay_bindings_is_logged_once_and_every_host_heard(host_factory, rabbitmq, vhost_uri):
    vhost = vhost_uri.rsplit("/", 1)[1]
    # an older hub's permissions: hosts may bind roster.# on bridge.roster, nothing else
    rabbitmq.ctl("set_topic_permissions", "-p", vhost, "guest", "bridge.roster", ".*", r"^roster\.#$")
    a = host_factory("a", broker_uri=vhost_uri, extra_env=FAST)
    b = host_factory("b", broker_uri=vhost_uri, extra_env=FAST)
    a.register("a1")
    b.register("b1")
    a.start_gateway()
    b.start_gateway()
    _until(lambda: _labels(a) == {"a1", "b1"}, what="a hears b directly")
    assert _roster(a)["relay"]["feed"] == "every host directly"
    out = rabbitmq.ctl(
        "list_bindings", "-p", vhost, "-q", "--no-table-headers", "source_name", "destination_name", "routing_key"
    )
    assert f"bridge.roster\troster.{a.name}\troster.#" in out.stdout.splitlines()
    assert a.whole_log().count("refused binding relay.#") == 1


FIXTURE = json.loads((Path(__file__).parent.parent / "data" / "roster_v1_frames.json").read_text())


def test_a_host_of_the_per_entity_protocol_is_heard_through_the_relay(host_factory, rabbitmq):
    """An old gateway's frames (the v1 fixture) reach a gateway that hears the relay alone,
    and its ``gone`` retires the entity there too."""
    from bridgecli import gids

    relay = _serving(Relay(host_factory("relay"), "r3"))
    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq.uri))
    try:
        a = _start(host_factory, "a", ["a1"], BRIDGE_ROSTER_RELAY="only")
        channel = connection.channel()
        old, gid = "oldhost", gids.mint("oldhost")

        def frame(name: str) -> bytes:
            # a 60 s interval: only the gone frame, not expiry, can retire it within the test
            text = FIXTURE[name].replace("{HOST}", old).replace("{GID}", gid)
            return text.replace('"interval":1.0', '"interval":60.0').encode()

        def beat(name: str, key: str) -> None:
            props = pika.BasicProperties(content_type="application/json", delivery_mode=1, expiration="3000")
            channel.basic_publish("bridge.roster", f"roster.{old}.{key}", frame(name), props)

        def beats() -> bool:
            beat("entity", gid)
            beat("gateway", "_gateway")
            connection.process_data_events(0.5)
            return "legacy-rev" in _labels(a)

        _until(beats, what="the relay-fed gateway hears the old host's entity")
        assert _bindings(rabbitmq, a) == {"relay.#"}
        beat("gone", gid)
        _until(lambda: "legacy-rev" not in _labels(a), what="the old host's gone frame through the relay")
    finally:
        connection.close()
        relay.end()


def test_kill_9_of_the_active_relay_leaves_every_view_whole_and_the_standby_feeds_on(host_factory, rabbitmq):
    """Two relays on one queue: the broker feeds one; ``kill -9`` it and the standby feeds the
    gateways, which never lose an entry meanwhile (they hear the relays alone)."""
    home = host_factory("relays")
    first = _serving(Relay(home, "ra"))
    second = _serving(Relay(home, "rb"))
    try:
        a = _start(host_factory, "a", ["a1"], BRIDGE_ROSTER_RELAY="only")
        b = _start(host_factory, "b", ["b1", "b2"], BRIDGE_ROSTER_RELAY="only")
        both = {"a1", "b1", "b2"}
        for host in (a, b):
            _until(lambda h=host: _labels(h) == both and _fed_by(h, "ra"), what=f"{host.name} fed by ra")
        first.kill()
        fewest = {host.name: len(both) for host in (a, b)}

        def fed_by_standby() -> bool:
            for host in (a, b):
                fewest[host.name] = min(fewest[host.name], len(_labels(host)))
            return all(_fed_by(host, "rb") for host in (a, b))

        _until(fed_by_standby, what="the standby feeds both gateways")
        b.register("b3")
        _until(lambda: "b3" in _labels(a), what="a hears b3 through the standby")
        assert set(fewest.values()) == {len(both)}  # neither view lost an entry
        assert _bindings(rabbitmq, a) == {"relay.#"}
    finally:
        first.end()
        second.end()
