"""``bridgecli.queue_migration`` on a real broker: classic queues become quorum ones (and
back) with every message, in order, with its properties, while others keep publishing. On an
embedded node with management every host's queues move; a message another broker user
published stops a user that may not impersonate, losing nothing."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import uuid
from dataclasses import asdict
from pathlib import Path
from urllib.parse import urlsplit

import pika
import pika.exceptions
import pytest

from bridgecli.amqp import topology
from bridgecli.errors import Conflict, ExitCode
from bridgecli.hub.rabbitadmin import RabbitAdmin
from bridgecli.nodeprocess import stop_epmd_if_idle
from bridgecli.queue_migration import Migrator, temp_name
from bridgecli.rabbitnode import LocalNode
from tests.support.hosts import Host


@pytest.fixture
def conn(vhost_uri):
    connection = pika.BlockingConnection(pika.URLParameters(vhost_uri))
    topology.declare(connection.channel(), *topology.SHARED_EXCHANGES)
    yield connection
    if connection.is_open:
        connection.close()


def _types(rabbitmq, vhost_uri) -> dict[str, str]:
    vhost = urlsplit(vhost_uri).path.lstrip("/")
    out = rabbitmq.ctl("list_queues", "-p", vhost, "name", "type", "-q", "--no-table-headers").stdout
    return {p[0]: p[1] for p in (line.split() for line in out.splitlines()) if len(p) == 2}


def _publish(connection, exchange: str, key: str, bodies, **props) -> None:
    channel = connection.channel()
    channel.confirm_delivery()
    for body in bodies:
        channel.basic_publish(exchange, key, body, pika.BasicProperties(delivery_mode=2, **props), mandatory=True)
    channel.close()


def _drain(connection, queue: str) -> list[tuple[bytes, pika.BasicProperties]]:
    """Every message of ``queue`` (consumed: basic_get is refused by single-active-consumer
    quorum queues), acked."""
    channel = connection.channel()
    got = []
    for method, props, body in channel.consume(queue, inactivity_timeout=0.2):
        if method is None:
            if channel.queue_declare(queue, passive=True).method.message_count == 0:
                break
            continue
        got.append((body, props))
        channel.basic_ack(method.delivery_tag)
    channel.close()
    return got


def _classic(connection, gid: str, host: str) -> list[str]:
    topology.declare(
        connection.channel(),
        topology.dead_letter_queue("classic"),
        topology.control_queue(host, "classic"),
        topology.inbox_queue(gid, "classic"),
    )
    return [topology.DLQ, f"control.{host}", topology.inbox_name(gid)]


def test_every_message_moves_in_order_with_its_properties_and_bindings(conn, rabbitmq, vhost_uri):
    gid, host = str(uuid.uuid4()), "h1"
    names = _classic(conn, gid, host)
    member = topology.channel_binding("ops")
    conn.channel().queue_bind(topology.inbox_name(gid), member.exchange, routing_key=member.routing_key)
    inbox_bodies = [b"inbox %d" % i for i in range(50)]
    _publish(
        conn,
        topology.MSG,
        gid,
        inbox_bodies,
        headers={"x-custom": "kept", "n": 7},
        message_id="m-1",
        correlation_id="c-1",
        user_id="guest",
        content_type="application/json",
    )
    _publish(conn, topology.DLX, "", [b"dead 1", b"dead 2"], headers={topology.REASON_HEADER: "invalid"})
    _publish(conn, topology.CONTROL, host, [b"ctl 1"])

    migrator = Migrator(conn, "quorum", user="guest")
    steps = migrator.plan(names, bindings={topology.inbox_name(gid): [member]})
    assert {(s.name, s.current, s.messages) for s in steps} == {
        (names[0], "classic", 2),
        (names[1], "classic", 1),
        (names[2], "classic", 50),
    }
    moved = {s.name: migrator.migrate(s) for s in steps}
    assert moved == {names[0]: 2, names[1]: 1, names[2]: 50}

    types = _types(rabbitmq, vhost_uri)
    assert {n: types[n] for n in names} == dict.fromkeys(names, "quorum")
    assert not any(n.endswith(".migrating") for n in types), types
    assert migrator.plan(names) == []  # nothing left to do: a second run is a no-op

    got = _drain(conn, names[2])
    assert [body for body, _ in got] == inbox_bodies
    props = got[0][1]
    assert props.headers == {"x-custom": "kept", "n": 7}
    assert (props.message_id, props.correlation_id, props.user_id) == ("m-1", "c-1", "guest")
    assert (props.content_type, props.delivery_mode) == ("application/json", 2)
    assert [b for b, p in _drain(conn, names[0])] == [b"dead 1", b"dead 2"]
    assert [b for b, p in _drain(conn, names[1])] == [b"ctl 1"]

    # the bindings came along: the gid, the channel membership, the DLX, the control key
    _publish(conn, topology.MSG, gid, [b"after"])
    _publish(conn, topology.MSG, member.routing_key, [b"to ops"])
    _publish(conn, topology.DLX, "", [b"dead 3"])
    _publish(conn, topology.CONTROL, host, [b"ctl 2"])
    assert [b for b, _ in _drain(conn, names[2])] == [b"after", b"to ops"]
    assert [b for b, _ in _drain(conn, names[0])] == [b"dead 3"]
    assert [b for b, _ in _drain(conn, names[1])] == [b"ctl 2"]

    # and back to classic
    back = Migrator(conn, "classic", user="guest")
    _publish(conn, topology.MSG, gid, [b"q1", b"q2"])
    assert [back.migrate(s) for s in back.plan(names) if s.name == names[2]] == [2]
    assert _types(rabbitmq, vhost_uri)[names[2]] == "classic"
    assert [b for b, _ in _drain(conn, names[2])] == [b"q1", b"q2"]


def test_a_queue_with_consumers_is_refused(conn):
    gid = str(uuid.uuid4())
    names = _classic(conn, gid, "busy")
    conn.channel().basic_consume("control.busy", lambda *a: None)
    migrator = Migrator(conn, "quorum")
    steps = migrator.plan(names)
    with pytest.raises(Conflict) as caught:
        migrator.refuse_consumed(steps)
    assert caught.value.exit_code == ExitCode.CONFLICT
    assert "control.busy" in str(caught.value) and "host busy" in str(caught.value)
    assert "bridge gateway stop" in str(caught.value)


def test_a_run_that_died_midway_is_finished(conn, rabbitmq, vhost_uri):
    """Two leftovers: one whose original is gone (died after deleting it), one whose
    original still holds the newer messages (died while moving them out)."""
    gone, half = str(uuid.uuid4()), str(uuid.uuid4())
    for gid in (gone, half):
        leftover = topology.inbox_queue(gid, "quorum")
        topology.declare(conn.channel(), topology.Queue(temp_name(leftover.name), arguments=leftover.arguments))
    topology.declare(conn.channel(), topology.inbox_queue(half, "classic"))
    _publish(conn, "", temp_name(topology.inbox_name(gone)), [b"g1", b"g2", b"g3"])
    _publish(conn, "", temp_name(topology.inbox_name(half)), [b"h1", b"h2"])
    _publish(conn, topology.MSG, half, [b"h3", b"h4"])

    migrator = Migrator(conn, "quorum")
    steps = migrator.plan([topology.inbox_name(gone), topology.inbox_name(half)])
    assert {(s.name, s.current, s.leftover, s.messages) for s in steps} == {
        (topology.inbox_name(gone), None, True, 3),
        (topology.inbox_name(half), "classic", True, 4),
    }
    for step in steps:
        migrator.migrate(step)
    types = _types(rabbitmq, vhost_uri)
    assert types[topology.inbox_name(gone)] == types[topology.inbox_name(half)] == "quorum"
    assert not any(n.endswith(".migrating") for n in types), types
    assert [b for b, _ in _drain(conn, topology.inbox_name(gone))] == [b"g1", b"g2", b"g3"]
    assert [b for b, _ in _drain(conn, topology.inbox_name(half))] == [b"h1", b"h2", b"h3", b"h4"]
    _publish(conn, topology.MSG, gone, [b"routed"])  # the binding was restored from topology
    assert [b for b, _ in _drain(conn, topology.inbox_name(gone))] == [b"routed"]


def test_messages_published_during_the_move_are_kept(conn, vhost_uri):
    gid = str(uuid.uuid4())
    inbox = topology.inbox_name(gid)
    topology.declare(conn.channel(), topology.inbox_queue(gid, "classic"))
    before = [b"before %d" % i for i in range(1500)]
    _publish(conn, topology.MSG, gid, before)

    done, confirmed = threading.Event(), []

    def publish() -> None:
        other = pika.BlockingConnection(pika.URLParameters(vhost_uri))
        channel = other.channel()
        channel.confirm_delivery()
        i = 0
        while not done.is_set() and i < 1500:
            body = b"during %d" % i
            channel.basic_publish(topology.MSG, gid, body, pika.BasicProperties(delivery_mode=2), mandatory=True)
            confirmed.append(body)
            i += 1
        other.close()

    publisher = threading.Thread(target=publish)
    publisher.start()
    try:
        migrator = Migrator(conn, "quorum")
        [step] = migrator.plan([inbox])
        migrator.migrate(step)
    finally:
        done.set()
        publisher.join()
    got = [b for b, _ in _drain(conn, inbox)]
    assert confirmed, "the publisher published nothing during the move"
    assert set(got) == set(before) | set(confirmed)  # none lost (a repeat is possible)
    assert [b for b in got if b.startswith(b"before")] == before


def test_cli_dry_run_changes_nothing_then_the_run_moves_and_a_consumer_is_refused(
    conn, rabbitmq, vhost_uri, host_factory
):
    host = host_factory("mq1", broker_uri=vhost_uri)
    gid = host.register("worker")
    names = _classic(conn, gid, host.env["BRIDGE_HOST_ID"])
    _publish(conn, topology.MSG, gid, [b"one", b"two"])

    dry = host.bridge("broker", "migrate-queues", "--dry-run", "--json", check=True)
    rows = json.loads(dry.stdout)["queues"]
    assert {(r["queue"], r["from"], r["to"], r["messages"], r["moved"]) for r in rows} == {
        (names[0], "classic", "quorum", 0, None),
        (names[1], "classic", "quorum", 0, None),
        (names[2], "classic", "quorum", 2, None),
    }
    assert {n: _types(rabbitmq, vhost_uri)[n] for n in names} == dict.fromkeys(names, "classic")
    assert "migrating" not in " ".join(_types(rabbitmq, vhost_uri))

    consumer = conn.channel()
    tag = consumer.basic_consume(names[2], lambda *a: None)
    refused = host.bridge("broker", "migrate-queues")
    assert refused.returncode == ExitCode.CONFLICT, refused.stderr
    assert names[2] in refused.stderr and "bridge gateway stop" in refused.stderr
    assert refused.stdout == ""
    consumer.basic_cancel(tag)

    done = host.bridge("broker", "migrate-queues", check=True)
    assert f"{names[2]} classic -> quorum: moved 2 messages" in done.stdout.splitlines()
    assert "messaging.inbox_queue_type quorum" in done.stderr  # the hint to switch the config
    assert {n: _types(rabbitmq, vhost_uri)[n] for n in names} == dict.fromkeys(names, "quorum")
    assert [b for b, _ in _drain(conn, names[2])] == [b"one", b"two"]
    again = host.bridge("broker", "migrate-queues", "--json", check=True)
    assert json.loads(again.stdout)["queues"] == []


def _count(connection, name: str) -> int | None:
    """Ready messages of queue ``name``; None when it does not exist."""
    channel = connection.channel()
    try:
        return channel.queue_declare(name, passive=True).method.message_count
    except pika.exceptions.ChannelClosedByBroker:
        return None
    finally:
        if channel.is_open:
            channel.close()


def test_a_foreign_user_id_needs_an_impersonator_and_a_rerun_as_one_finishes(conn, rabbitmq, vhost_uri, host_factory):
    """RabbitMQ refuses a ``user_id`` other than the publisher's unless it is an impersonator:
    a plain user stops at such a message with exit 12 (what moved stays in ``N.migrating``,
    the rest in ``N``); an impersonator's rerun resumes and keeps the order."""
    parts = urlsplit(vhost_uri)
    vhost, suffix = parts.path.lstrip("/"), uuid.uuid4().hex[:8]
    plain, imp = f"plain{suffix}", f"imp{suffix}"
    for user in (plain, imp):
        rabbitmq.ctl("add_user", user, "pw")
        rabbitmq.ctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*")
    rabbitmq.ctl("set_user_tags", imp, "impersonator")  # plain has no tag at all
    try:
        uri = {u: f"amqp://{u}:pw@{parts.hostname}:{parts.port}/{vhost}" for u in (plain, imp)}
        host = host_factory("imp", broker_uri=uri[plain])
        gid = host.register("keeper")
        names = _classic(conn, gid, host.env["BRIDGE_HOST_ID"])
        inbox = names[2]
        _publish(conn, topology.MSG, gid, [b"m1"])
        _publish(conn, topology.MSG, gid, [b"m2"], user_id="guest")  # conn logs in as guest
        _publish(conn, topology.MSG, gid, [b"m3"])

        refused = host.bridge("broker", "migrate-queues")
        assert refused.returncode == ExitCode.PERMISSION, refused.stderr
        assert refused.stderr.count("\n") == 1, refused.stderr  # one line, no traceback
        assert f"a message in {inbox} was published by broker user 'guest'" in refused.stderr
        assert "nothing was lost" in refused.stderr and "impersonator" in refused.stderr
        assert (_count(conn, inbox), _count(conn, temp_name(inbox))) == (2, 1)  # m2, m3 | m1

        done = host.bridge("broker", "migrate-queues", "--json", env={"BRIDGE_BROKER_URI": uri[imp]}, check=True)
        rows = {r["queue"]: r for r in json.loads(done.stdout)["queues"]}
        assert (rows[inbox]["from"], rows[inbox]["messages"], rows[inbox]["moved"]) == ("classic", 3, 3)
        types = _types(rabbitmq, vhost_uri)
        assert {n: types[n] for n in names} == dict.fromkeys(names, "quorum")
        assert not any(n.endswith(".migrating") for n in types), types
        got = _drain(conn, inbox)
        assert [(body, props.user_id) for body, props in got] == [(b"m1", None), (b"m2", "guest"), (b"m3", None)]
    finally:
        for user in (plain, imp):
            rabbitmq.ctl("delete_user", user, check=False)


def test_the_embedded_node_moves_every_hosts_queues_found_by_the_management_api():
    """Commands on a machine whose embedded node has management (a hub) list its queues there:
    another host's inbox, control queue and channel membership move too; exclusive and
    auto-delete queues are not bridge's durable ones and stay as they are."""
    root = Path(tempfile.mkdtemp(prefix="bmig", dir="/tmp"))
    here, far = f"here{uuid.uuid4().hex[:6]}", f"far{uuid.uuid4().hex[:6]}"
    host = Host(here, root, "")
    host.env.pop("BRIDGE_BROKER_URI")  # commands use the embedded node
    node = LocalNode(host.home.data_dir / "broker", management=True, host_user=here)
    try:
        node.start()
        admin = RabbitAdmin(node.management_port, *node.admin_credentials)
        admin.wait_ready(60)
        (host.home.data_dir / "broker" / "state.json").write_text(json.dumps(asdict(node.info())))
        conn = pika.BlockingConnection(pika.URLParameters(node.admin_uri))  # an impersonator
        topology.declare(conn.channel(), *topology.SHARED_EXCHANGES)
        mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
        names = [*_classic(conn, mine, here), f"control.{far}", topology.inbox_name(theirs)]
        topology.declare(conn.channel(), topology.control_queue(far), topology.inbox_queue(theirs))
        member = topology.channel_binding("ops")
        conn.channel().queue_bind(topology.inbox_name(theirs), member.exchange, routing_key=member.routing_key)
        _publish(conn, topology.MSG, mine, [b"a1", b"a2"], user_id=here)
        _publish(conn, topology.MSG, theirs, [b"b1", b"b2", b"b3"], user_id=far)
        _publish(conn, topology.CONTROL, far, [b"ctl"])
        _publish(conn, topology.DLX, "", [b"dead"])
        # not durable bridge queues: a roster queue, and a held exclusive and an auto-delete
        # queue named like bridge's (the inventory must not even look into them)
        holder = pika.BlockingConnection(pika.URLParameters(node.admin_uri))
        held = f"agent.{uuid.uuid4()}.inbox"
        topology.declare(
            holder.channel(),
            topology.roster_queue(far),
            topology.Queue(held, exclusive=True),
            topology.Queue(f"control.gone{here}", auto_delete=True),
        )

        done = host.bridge("broker", "migrate-queues", "--json", check=True)
        rows = {r["queue"]: (r["from"], r["moved"]) for r in json.loads(done.stdout)["queues"]}
        assert rows == {
            names[0]: ("classic", 1),
            names[1]: ("classic", 0),
            names[2]: ("classic", 2),
            names[3]: ("classic", 1),
            names[4]: ("classic", 3),
        }
        queues = {q["name"]: q for q in admin.queues()}
        assert {n: queues[n]["type"] for n in names} == dict.fromkeys(names, "quorum")
        assert not any(n.endswith(".migrating") for n in queues), queues
        for name in (f"roster.{far}", held, f"control.gone{here}"):
            assert queues[name]["type"] == "classic", queues[name]
        bound = {(b["source"], b["routing_key"]) for b in admin.queue_bindings(names[4]) if b["source"]}
        assert bound == {(topology.MSG, theirs), (member.exchange, member.routing_key)}

        _publish(conn, topology.MSG, member.routing_key, [b"to ops"])
        got = _drain(conn, names[4])
        assert [(body, props.user_id) for body, props in got] == [
            (b"b1", far),
            (b"b2", far),
            (b"b3", far),
            (b"to ops", None),
        ]
        assert [(body, props.user_id) for body, props in _drain(conn, names[2])] == [(b"a1", here), (b"a2", here)]
        assert [body for body, _ in _drain(conn, names[3])] == [b"ctl"]
        assert [body for body, _ in _drain(conn, names[0])] == [b"dead"]
        holder.close()
        conn.close()
    finally:
        node.stop()
        stop_epmd_if_idle()
        shutil.rmtree(root, ignore_errors=True)
