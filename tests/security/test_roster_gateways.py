"""Roster frames between real gateways on a real broker: a host announces only itself.

The attacker here is any publisher on ``bridge.roster`` with its own host id (the single-node
broker's guest may publish any key, which is exactly what a joined host may do under its own
id): it claims another host's entity and sends a label full of terminal escapes. The hub
variant, with a joined host's real credentials, is in test_roster_hub.py.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pika

from bridgecli import gids, roster
from bridgecli.gateway.client import GatewayClient
from bridgecli.sanitize import is_inert

FAST = {"BRIDGE_ROSTER_INTERVAL": "0.5"}
EVIL = "evil\x1b]0;owned\x07\x1b[2J\rfake\x9b31m"


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


def _frame(host, gid, label):
    entity = type("E", (), {"gid": gid, "label": label, "role": "agent", "backend": "hold", "created": 1.0})
    return roster.heartbeat_frame(host=host, version="0", interval=0.5, entity=entity, status="idle")


def _publish(uri, frames):
    """Publish (host, gid, body) frames in order on one channel, with confirms."""
    connection = pika.BlockingConnection(pika.URLParameters(uri))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        for host, gid, body in frames:
            channel.basic_publish("bridge.roster", roster.routing_key(host, gid), body)
    finally:
        connection.close()


def test_a_host_cannot_announce_another_hosts_entity_nor_print_escapes(host_factory):
    a = host_factory("a", extra_env=FAST)
    alpha = a.register("alpha", role="main")
    a.start_gateway()
    _wait_until(lambda: any(e["gid"] == alpha for e in _socket_roster(a)["entries"]))
    mallory = f"m-{uuid.uuid4().hex[:6]}"
    evil, sentinel = gids.mint(mallory), gids.mint(mallory)
    _publish(
        a.env["BRIDGE_BROKER_URI"],
        [
            (mallory, alpha, _frame(mallory, alpha, "stolen")),  # on its own key, a's gid
            (mallory, evil, _frame(mallory, evil, EVIL)),
            # last on the same channel: once a shows it, a has read the two before
            (mallory, sentinel, _frame(mallory, sentinel, "sentinel")),
        ],
    )
    _wait_until(lambda: any(e["gid"] == sentinel for e in _socket_roster(a)["entries"]))
    rows = {e["gid"]: e for e in _socket_roster(a)["entries"]}
    assert (rows[alpha]["label"], rows[alpha]["host"]) == ("alpha", a.name)
    assert is_inert(rows[evil]["label"]) and rows[evil]["label"].startswith("evil")
    refused = a.bridge_json("status")["extra"]["roster_refused"]
    assert refused["foreign_gid"] >= 1
    table = a.bridge("roster", check=True)
    assert "evil" in table.stdout and is_inert(table.stdout.replace("\n", ""))
    as_json = a.bridge("roster", "--json", check=True).stdout
    assert is_inert(as_json.replace("\n", ""))


def test_bridge_roster_without_a_gateway_refuses_the_claim_too(host_factory):
    a = host_factory("a", extra_env=FAST)
    alpha = a.register("alpha", role="main")
    a.start_gateway()
    _wait_until(lambda: any(e["gid"] == alpha for e in _socket_roster(a)["entries"]))
    c = host_factory("c", extra_env=FAST)  # no gateway: `bridge roster` listens one interval
    mallory = f"m-{uuid.uuid4().hex[:6]}"
    stop = threading.Event()

    def claim() -> None:
        # far more often than a's heartbeats, all through c's listening window
        while not stop.is_set():
            _publish(a.env["BRIDGE_BROKER_URI"], [(mallory, alpha, _frame(mallory, alpha, "stolen"))] * 20)

    thread = threading.Thread(target=claim, daemon=True)
    thread.start()
    try:
        proc = c.bridge("roster", "--json", check=True)
    finally:
        stop.set()
        thread.join(10)
    rows = {e["gid"]: e for e in json.loads(proc.stdout)["entries"]}
    assert (rows[alpha]["label"], rows[alpha]["host"]) == ("alpha", a.name)


def test_with_the_sender_check_on_a_frame_published_as_another_user_is_refused(host_factory, rabbitmq):
    """Dead-lettering (or any path around topic permissions) keeps the publisher's user_id:
    under ``security.sender_check = host`` only the key host's user speaks for it."""
    user, password = f"mal{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    rabbitmq.ctl("add_user", user, password)
    try:
        rabbitmq.ctl("set_permissions", "-p", "/", user, ".*", ".*", ".*")
        env = {**FAST, "BRIDGE_SECURITY_SENDER_CHECK": "host", "BRIDGE_SECURITY_TRUSTED_USERS": "guest"}
        a = host_factory("a", extra_env=env)
        alpha = a.register("alpha", role="main")
        a.start_gateway()
        _wait_until(lambda: any(e["gid"] == alpha for e in _socket_roster(a)["entries"]))
        uri = a.env["BRIDGE_BROKER_URI"].replace("guest:guest@", f"{user}:{password}@")
        assert uri != a.env["BRIDGE_BROKER_URI"]
        forged = gids.mint(a.name)  # a gid of a's, so only the user tells it apart
        connection = pika.BlockingConnection(pika.URLParameters(uri))
        try:
            channel = connection.channel()
            channel.confirm_delivery()
            props = pika.BasicProperties(user_id=user)
            body = _frame(a.name, forged, "x")
            channel.basic_publish("bridge.roster", roster.routing_key(a.name, forged), body, props)
            gone = roster.gone_frame(host=a.name, gid=alpha, reason="forged")
            channel.basic_publish("bridge.roster", roster.routing_key(a.name, alpha), gone, props)
        finally:
            connection.close()
        _wait_until(lambda: a.bridge_json("status")["extra"]["roster_refused"]["user_mismatch"] >= 2)
        gids_seen = {e["gid"] for e in _socket_roster(a)["entries"]}
        assert forged not in gids_seen and alpha in gids_seen
    finally:
        rabbitmq.ctl("delete_user", user, check=False)


def test_the_gateway_names_its_broker_user_on_its_frames(host_factory):
    a = host_factory("a", extra_env=FAST)
    a.register("alpha", role="main")
    connection = pika.BlockingConnection(pika.URLParameters(a.env["BRIDGE_BROKER_URI"]))
    try:
        channel = connection.channel()
        channel.exchange_declare("bridge.roster", "topic", durable=True)
        name = f"bridge.listen.{uuid.uuid4()}"
        channel.queue_declare(name, exclusive=True, auto_delete=True)
        channel.queue_bind(name, "bridge.roster", routing_key=f"roster.{a.name}.#")
        a.start_gateway()
        for method, props, _body in channel.consume(name, auto_ack=True, inactivity_timeout=20):
            assert method is not None, "no heartbeat from a"
            assert props.user_id == "guest"
            break
    finally:
        connection.close()
