"""A cluster hub keeps answering registrar requests when the hub machine dies.

``hub`` runs ``bridge hub start --cluster``; hostA and hostC join as nodes (each then runs a
registrar of its own) and hostB as a host. With an invite for hostD made first, the hub
machine's RabbitMQ and registrar are killed with SIGKILL: a node's registrar answers hostB,
hostD joins with that invite (its broker user and grants made by a node's registrar, from
the replicated records) and hostB's message reaches hostD's new entity. ``bridge hub start``
then brings the hub back with the records written meanwhile and one registrar still active,
and hostE joins as a node while a node's registrar may still be the active one. No joined
host can read, publish to, purge or delete the replicated records or the node enrolments.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import sqlite3
import ssl
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator

import pika
import pika.exceptions
import pytest

from tests.multihost.helpers import poll, register, wait_for
from tests.multihost.hub_lab import broker_uri, ca_file, cluster_hub
from tests.support.netns import NetnsLab

pytestmark = [pytest.mark.netns, pytest.mark.slow]

NODES = ("hostA", "hostC")
HOST = "hostB"
NEW = "hostD"  # joins while the hub machine is down
LATE_NODE = "hostE"  # joins as a node after the hub machine's return


@pytest.fixture(scope="module")
def lab() -> Iterator[NetnsLab]:
    """A cluster hub on three machines and hostB joined with its gateway on hostA's node."""
    with cluster_hub("brf", (*NODES, HOST, NEW, LATE_NODE), hub_gateway=False) as lab:
        for name in NODES:
            line = lab.bridge("hub", "hub", "invite", "--node", name.lower(), "--address", lab.addr(name))
            lab.bridge(name, "join", "--node", line.stdout.strip(), timeout=240)
        lab.bridge(HOST, "join", lab.bridge("hub", "hub", "invite", HOST.lower()).stdout.strip())
        _first(lab, HOST, "hostA")
        lab.start_gateway(HOST)
        yield lab


def _first(lab: NetnsLab, host: str, machine: str) -> None:
    """Put ``machine``'s node first in ``host``'s broker.uri."""
    config = lab.host(host).home.config_file
    uris = broker_uri(lab, host).split(",")
    ordered = sorted(uris, key=lambda u: f"@{lab.addr(machine)}:" not in u)
    config.write_text(config.read_text().replace(",".join(uris), ",".join(ordered)))


def _on_node(lab: NetnsLab, host: str, machine: str, fn):
    """``fn(connection, user)`` as ``host``'s broker user on ``machine``'s node only."""
    uri = next(u for u in broker_uri(lab, host).split(",") if f"@{lab.addr(machine)}:" in u)
    context = ssl.create_default_context(cafile=ca_file(lab, host))

    def work():
        params = pika.URLParameters(uri)
        params.ssl_options = pika.SSLOptions(context, params.host)
        connection = pika.BlockingConnection(params)
        try:
            return fn(connection, urllib.parse.unquote(urllib.parse.urlsplit(uri).username or ""))
        finally:
            if connection.is_open:
                connection.close()

    return lab.in_ns(host, work)


def _ask_registrar(connection, user: str, timeout: float) -> dict | None:
    """One ``nodes`` request as this connection's user; its answer, or None in ``timeout``."""
    channel = connection.channel()
    answers: list[dict] = []
    channel.basic_consume("amq.rabbitmq.reply-to", lambda ch, m, p, b: answers.append(json.loads(b)), auto_ack=True)
    channel.basic_publish(
        "bridge.registrar",
        "claim",
        json.dumps({"op": "nodes"}).encode(),
        pika.BasicProperties(reply_to="amq.rabbitmq.reply-to", correlation_id=str(uuid.uuid4()), user_id=user),
    )
    deadline = time.monotonic() + timeout
    while not answers and time.monotonic() < deadline:
        connection.process_data_events(time_limit=0.1)
    return answers[0] if answers else None


def _refused(connection, user: str, action) -> int:
    channel = connection.channel()
    channel.confirm_delivery()
    try:
        action(channel)
    except pika.exceptions.ChannelClosedByBroker as exc:
        return exc.reply_code
    return 0


def _in_node_copies(lab: NetnsLab, invite_id: str) -> bool:
    """True when every node machine's copy of the hub records holds invite ``invite_id``."""
    for name in NODES:
        path = next(lab.host(name).home.root.rglob("node/hub.db"), None)
        if path is None:
            return False
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            if db.execute("SELECT 1 FROM invites WHERE id=?", (invite_id,)).fetchone() is None:
                return False
    return True


def _registrar_queue(lab: NetnsLab) -> dict:
    """``bridge.registrar`` as the hub's management API reports it."""
    port = lab.bridge_json("hub", "hub", "status")["broker"]["management_port"]
    creds = json.loads((lab.host("hub").home.data_dir / "broker" / "credentials.json").read_text())
    auth = base64.b64encode(f"{creds['admin_user']}:{creds['admin_password']}".encode()).decode()

    def work() -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/queues/%2F/bridge.registrar", headers={"Authorization": f"Basic {auth}"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    return lab.in_ns("broker", work)


def test_a_node_registrar_answers_while_the_hub_machine_is_down(lab: NetnsLab):
    for name in NODES:  # each node machine runs a registrar of its own
        log = lab.host(name).home.root.rglob("node/registrar.log")
        assert any("registrar serving" in p.read_text() for p in log), name
    worker = register(lab, HOST, "rf-worker")
    made = lab.bridge_json("hub", "hub", "invite", NEW.lower())  # made before the kill
    line = made["invite"]
    # the hub's registrar publishes a change of its records within about a second
    wait_for(lambda: _in_node_copies(lab, made["id"]), 15, 0.2, what="the invite in every node's records")

    # no joined host may touch the replicated records, on any node
    for action in (
        lambda ch: ch.basic_get("bridge.hub.state"),
        lambda ch: ch.basic_consume("bridge.hub.state", lambda *a: None),
        lambda ch: ch.basic_publish(
            "bridge.hub.copies", "", b"forged", pika.BasicProperties(headers={"x-hub-version": 99})
        ),
        lambda ch: ch.queue_purge("bridge.hub.state"),
        lambda ch: ch.queue_delete("bridge.hub.state"),
        lambda ch: ch.basic_publish(
            "", "bridge.hub.state", b"forged", pika.BasicProperties(headers={"x-hub-version": 99})
        ),
        lambda ch: ch.queue_declare("bridge.hub.state", durable=True, arguments={"x-queue-type": "quorum"}),
        lambda ch: ch.basic_get("bridge.registrar"),
        lambda ch: ch.queue_purge("bridge.registrar"),
        lambda ch: ch.queue_delete("bridge.registrar"),
        lambda ch: ch.basic_get("bridge.registrar.nodes"),
        lambda ch: ch.queue_purge("bridge.registrar.nodes"),
        lambda ch: ch.queue_delete("bridge.registrar.nodes"),
        lambda ch: ch.queue_bind("bridge.registrar.nodes", "bridge.registrar", "claim"),
    ):
        assert _on_node(lab, HOST, "hostA", lambda c, u, a=action: _refused(c, u, a)) == 403

    # kill -9 the hub machine's node and registrar
    registrar = lab.bridge_json("hub", "hub", "status")["registrar"]["pid"]
    hub_state = json.loads((lab.host("hub").home.data_dir / "broker" / "state.json").read_text())
    os.kill(hub_state["pid"], signal.SIGKILL)
    os.kill(registrar, signal.SIGKILL)
    killed = time.monotonic()

    answered: list[dict] = []

    def ask() -> bool:
        answer = _on_node(lab, HOST, "hostA", lambda c, u: _ask_registrar(c, u, 1.0))
        if answer is not None:
            answered.append(answer)
        return bool(answered)

    wait_for(ask, 60, 0.1, what="a registrar answer after the hub machine died")
    print(f"a node's registrar answered {time.monotonic() - killed:.1f}s after the kill")
    assert answered[0]["ok"] and len(answered[0]["brokers"]) == 3

    began = time.monotonic()
    lab.bridge(NEW, "join", line, timeout=120)  # the invite is in the replicated records
    print(f"hostD joined with a pre-kill invite in {time.monotonic() - began:.1f}s, hub machine down")
    lab.start_gateway(NEW)
    fresh = register(lab, NEW, "rf-fresh")
    # --force: the roster relay runs on the hub machine only (its presence is not tested here)
    lab.bridge(HOST, "send", fresh, "granted without the hub", "--from", "rf-worker", "--force")
    assert [m["content"] for m in poll(lab, NEW, fresh)] == ["granted without the hub"]
    lab.bridge(NEW, "send", worker, "and back", "--from", "rf-fresh", "--force")
    assert [m["content"] for m in poll(lab, HOST, worker)] == ["and back"]

    # the hub machine comes back: it loads the newer records; one registrar stays active
    lab.bridge("hub", "hub", "start", timeout=240)
    wait_for(
        lambda: all(n["running"] for n in lab.bridge_json("hub", "hub", "nodes")["nodes"]), 60, 1.0, what="hub back"
    )
    hosts = {h["host"] for h in lab.bridge_json("hub", "hub", "hosts")["hosts"]}
    assert {HOST.lower(), NEW.lower()} <= hosts, hosts
    # the hub's registrar consumes again once it has connected and loaded the newer records
    # (a node just back may list the queue before its statistics: no "consumers" yet)
    queue = wait_for(
        lambda: (lambda q: q if q.get("consumers") == 3 else None)(_registrar_queue(lab)), 60, 1.0, what="3 registrars"
    )
    details = [(c["channel_details"]["connection_name"], c.get("activity_status")) for c in queue["consumer_details"]]
    print(f"bridge.registrar consumers after the hub's return: {details}")
    assert queue["consumers"] == 3 and queue["arguments"]["x-single-active-consumer"] is True
    statuses = [s for _, s in details if s is not None]
    assert not statuses or statuses.count("single_active") == 1, details

    # a node joins while a node's registrar is still the active one: node enrolments go to
    # the hub machine's registrar alone (it holds the CA key)
    active = [name for name, status in details if status == "single_active"]
    print(f"active registrar when {LATE_NODE} joins as a node: {active}")
    made = lab.bridge_json("hub", "hub", "invite", "--node", LATE_NODE.lower(), "--address", lab.addr(LATE_NODE))
    # an invite the hub's CLI writes reaches the nodes' copies of the records
    wait_for(lambda: _in_node_copies(lab, made["id"]), 15, 0.2, what="the node invite in every node's records")
    lab.bridge(LATE_NODE, "join", "--node", made["invite"], timeout=240)
    names = {n["name"] for n in lab.bridge_json("hub", "hub", "nodes")["nodes"]}
    assert LATE_NODE.lower() in names, names
