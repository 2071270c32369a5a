"""Least privilege across namespace hosts: one RabbitMQ user per host (docs/deploy.md).

Two extra installations, ``seca`` in hostA's namespace and ``secb`` in hostB's, log in as
their own users with the per-host permissions of :mod:`bridgecli.hub.permissions` and run
with ``security.sender_check = host``. The test proves the messaging still works, that A
cannot consume, delete or eavesdrop on B's inbox nor publish as B, and that a message
claiming to come from B but published by A is dead-lettered with ``sender_mismatch``.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pika
import pika.exceptions
import pytest

from bridgecli.amqp import topology
from bridgecli.envelope import Envelope
from bridgecli.errors import ExitCode
from bridgecli.hub.permissions import for_host
from tests.multihost.helpers import poll, register, wait_for
from tests.support.netns import NetnsLab

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def secure_hosts(netns_lab: NetnsLab):
    """Two per-host-user installations (module scope: each rabbitmqctl call costs seconds)."""
    lab = netns_lab
    tag = uuid.uuid4().hex[:4]
    users = {"A": (f"seca{tag}", "hostA"), "B": (f"secb{tag}", "hostB")}
    creds = {}
    for key, (user, of) in users.items():
        password = uuid.uuid4().hex
        creds[key] = (user, password)
        lab.broker.ctl("add_user", user, password)
        lab.add_member(
            user,
            of,
            {
                "BRIDGE_HOST_ID": user,
                "BRIDGE_BROKER_URI": lab.broker_uri(user, password),
                "BRIDGE_SECURITY_SENDER_CHECK": "host",
            },
        )
    a, b = creds["A"][0], creds["B"][0]
    main = register(lab, a, "lp-main", role="main")  # offline: the inbox is declared by the gateway
    worker = register(lab, b, "lp-worker")
    for user in (a, b):  # static: no gid lists, nothing to re-apply after a registration
        for args in for_host(user).rabbitmqctl(user):
            lab.broker.ctl(*args)
    # the broker's owner declares the shared objects; the host users may not
    lab.in_ns("hostB", lambda: _guest_channel(lab, lambda ch: topology.declare_shared(ch)))
    lab.start_gateway(a)
    lab.start_gateway(b)
    yield {"a": a, "b": b, "main": main, "worker": worker, "creds": creds}
    for user in (a, b):
        lab.stop_gateway(user)
        lab.broker.ctl("delete_user", user, check=False)


def _as_user(lab: NetnsLab, user: str, password: str, fn) -> Any:
    """Run ``fn(channel)`` on a fresh connection from hostA's namespace as ``user``."""

    def work() -> Any:
        params = pika.ConnectionParameters(
            lab.broker_addr, 5672, "/", pika.PlainCredentials(user, password), connection_attempts=1, socket_timeout=5
        )
        connection = pika.BlockingConnection(params)
        try:
            return fn(connection.channel())
        finally:
            if connection.is_open:
                connection.close()

    return lab.in_ns("hostA", work)


def _refused(lab: NetnsLab, user: str, password: str, fn) -> int:
    """The AMQP reply code with which the broker refused ``fn`` (0: it was allowed)."""
    try:
        _as_user(lab, user, password, fn)
    except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker) as exc:
        return exc.reply_code
    return 0


def test_per_host_users_still_message_and_show_the_authenticated_user(netns_lab: NetnsLab, secure_hosts):
    lab = netns_lab
    s = secure_hosts
    sent = lab.bridge_json(s["a"], "send", s["worker"], "least privilege hello", "--from", "lp-main", "--force")
    got = poll(lab, s["b"], s["worker"])
    assert [(m["msgId"], m["user"], m["fromHost"]) for m in got] == [(sent["msgId"], s["a"], s["a"])]
    lab.bridge(s["b"], "reply", sent["msgId"], "ack", "--from", "lp-worker")
    back = poll(lab, s["a"], s["main"])
    assert [(m["content"], m["user"]) for m in back] == [("ack", s["b"])]
    # a control request and its answer: the answer comes back through bridge.control (no
    # grant on the default exchange) — refused there, this would be a timeout instead
    wait_for(
        lambda: any(g["host"] == s["b"] for g in lab.bridge_json(s["a"], "roster", "--json")["gateways"]),
        what="host B's gateway in host A's roster",
    )
    unknown = lab.bridge(s["a"], "spawn", "no-such-profile", "--host", s["b"], "--wait-ready", "5s", check=False)
    assert unknown.returncode == ExitCode.NOT_FOUND, unknown.stderr
    assert f"host {s['b']} has no profile 'no-such-profile'" in unknown.stderr, unknown.stderr


def test_host_a_cannot_touch_host_b_inbox(netns_lab: NetnsLab, secure_hosts):
    lab = netns_lab
    s = secure_hosts
    user, password = s["creds"]["A"]
    inbox_b = topology.inbox_name(s["worker"])
    inbox_a = topology.inbox_name(s["main"])
    # consume, get, purge, delete B's inbox: all refused (403 ACCESS_REFUSED)
    assert _refused(lab, user, password, lambda ch: ch.basic_consume(inbox_b, lambda *a: None)) == 403
    assert _refused(lab, user, password, lambda ch: ch.basic_get(inbox_b)) == 403
    assert _refused(lab, user, password, lambda ch: ch.queue_purge(inbox_b)) == 403
    assert _refused(lab, user, password, lambda ch: ch.queue_delete(inbox_b)) == 403
    # eavesdropping: binding its own inbox to B's gid is refused by the topic permission
    assert (
        _refused(lab, user, password, lambda ch: ch.queue_bind(inbox_a, topology.MSG, routing_key=s["worker"])) == 403
    )
    # announcing presence for another host is refused too
    assert (
        _refused(
            lab,
            user,
            password,
            lambda ch: (
                ch.confirm_delivery(),
                ch.basic_publish(topology.ROSTER, f"roster.{s['b']}.{s['worker']}", b"{}"),
            ),
        )
        == 403
    )
    # ... while its own inbox is fine
    assert _refused(lab, user, password, lambda ch: ch.basic_get(inbox_a)) == 0
    # publishing as B is refused by the broker itself (user_id must be the connection's user)
    assert (
        _refused(
            lab,
            user,
            password,
            lambda ch: (
                ch.confirm_delivery(),
                ch.basic_publish(topology.MSG, s["worker"], b"{}", pika.BasicProperties(user_id=s["b"])),
            ),
        )
        == 406
    )


def test_host_user_may_publish_only_to_bridge_exchanges(netns_lab: NetnsLab, secure_hosts):
    lab = netns_lab
    user, password = secure_hosts["creds"]["A"]
    made_up = f"exfil.{uuid.uuid4().hex[:6]}"
    # it exists (declared by guest), so the refusal is the permission, not a missing exchange
    lab.in_ns("hostB", lambda: _guest_channel(lab, lambda ch: ch.exchange_declare(made_up, "topic", auto_delete=True)))

    def publish_to(exchange: str):
        return lambda ch: (
            ch.confirm_delivery(),
            ch.basic_publish(exchange, "anything", b"{}", pika.BasicProperties(user_id=user)),
        )

    try:
        for exchange in ("amq.topic", "amq.direct", "amq.fanout", made_up):
            assert _refused(lab, user, password, publish_to(exchange)) == 403, exchange
    finally:
        lab.in_ns("hostB", lambda: _guest_channel(lab, lambda ch: ch.exchange_delete(made_up)))
    # the bridge exchanges are fine (nothing is bound under this key: dropped, not refused)
    assert (
        _refused(
            lab,
            user,
            password,
            lambda ch: (
                ch.confirm_delivery(),
                ch.basic_publish(topology.MSG, "no-such-gid", b"{}", pika.BasicProperties(user_id=user)),
            ),
        )
        == 0
    )
    # the default exchange is not a bridge exchange either: no queue can be published to by name
    assert (
        _refused(
            lab,
            user,
            password,
            lambda ch: (
                ch.confirm_delivery(),
                ch.basic_publish("", f"bridge.reply.{uuid.uuid4()}", b"{}", pika.BasicProperties(user_id=user)),
            ),
        )
        == 403
    )


def test_claiming_another_host_is_dead_lettered_as_sender_mismatch(netns_lab: NetnsLab, secure_hosts):
    lab = netns_lab
    s = secure_hosts
    user, password = s["creds"]["A"]
    forged = Envelope(
        kind="SEND",
        sender=s["main"],
        recipient=s["worker"],
        content="I am B, trust me",
        sender_label="lp-main",
        sender_host=s["b"],
    )

    def publish(ch) -> None:
        ch.confirm_delivery()
        ch.basic_publish(
            topology.MSG,
            s["worker"],
            forged.to_bytes(),
            pika.BasicProperties(**forged.amqp_properties(), user_id=user),
            mandatory=True,
        )

    _as_user(lab, user, password, publish)

    def dead_letter_of(msg_id: str):
        def look(ch) -> dict | None:
            found = None
            while True:
                method, props, body = ch.basic_get(topology.DLQ)
                if method is None:
                    return found  # closing without ack puts everything back
                if props.message_id == msg_id:
                    found = dict(props.headers or {})

        guest = lambda fn: lab.in_ns("hostB", lambda: _guest_channel(lab, fn))  # noqa: E731
        return guest(look)

    headers = wait_for(lambda: dead_letter_of(forged.msg_id), 30, 0.5, "the forged message in bridge.dlq")
    assert headers[topology.REASON_HEADER] == "sender_mismatch"
    assert s["b"] in headers[topology.DETAIL_HEADER] and user in headers[topology.DETAIL_HEADER]
    assert poll(lab, s["b"], s["worker"], "1s") == []

    # B's own user, claiming its own host, but speaking for an entity the roster puts on A
    b_user, b_password = s["creds"]["B"]
    borrowed = Envelope(
        kind="SEND",
        sender=s["main"],
        recipient=s["worker"],
        content="as main",
        sender_label="lp-main",
        sender_host=s["b"],
    )
    _as_user(
        lab,
        b_user,
        b_password,
        lambda ch: (
            ch.confirm_delivery(),
            ch.basic_publish(
                topology.MSG,
                s["worker"],
                borrowed.to_bytes(),
                pika.BasicProperties(**borrowed.amqp_properties(), user_id=b_user),
                mandatory=True,
            ),
        ),
    )
    headers = wait_for(lambda: dead_letter_of(borrowed.msg_id), 30, 0.5, "the borrowed-gid message in bridge.dlq")
    assert headers[topology.REASON_HEADER] == "sender_mismatch"
    assert f"announced on host '{s['a']}'" in headers[topology.DETAIL_HEADER]


def _guest_channel(lab: NetnsLab, fn) -> Any:
    connection = pika.BlockingConnection(pika.URLParameters(lab.broker_uri()))
    try:
        return fn(connection.channel())
    finally:
        if connection.is_open:
            connection.close()


def test_permission_patterns_shape():
    import re

    from bridgecli import gids

    legacy = "0b5e3a5e-1111-4222-8333-444455556666"
    perms = for_host("hosta", [legacy])
    mine, theirs = gids.mint("hosta"), gids.mint("hostb")
    for gid in (legacy, mine):
        assert re.match(perms.read, f"agent.{gid}.inbox") and re.match(perms.configure, f"agent.{gid}.inbox")
        assert re.match(perms.topic_msg_read, gid) and re.match(perms.topic_roster_write, f"roster.hosta.{gid}")
    for gid in ("0b5e3a5e-1111-4222-8333-444455556667", theirs):
        assert not re.match(perms.read, f"agent.{gid}.inbox") and not re.match(perms.topic_msg_read, gid)
        assert not re.match(perms.topic_roster_write, f"roster.hosta.{gid}")
    assert re.match(perms.read, "control.hosta") and not re.match(perms.read, "control.hostb")
    assert not re.match(perms.read, "bridge.dlq")  # the DLQ is for operators
    assert not re.match(perms.topic_roster_write, f"roster.hostb.{theirs}")
    # no configure on anything shared; no binding of bridge.dlx or another host's delays
    for shared in ("bridge.msg", "bridge.roster", "bridge.ctl", "bridge.dlx", "bridge.dlq", "bridge.delay.hostb.10"):
        assert not re.match(perms.configure, shared), shared
    assert not re.match(perms.read, "bridge.dlx") and not re.match(perms.read, "bridge.delay.hostb")
    assert re.match(perms.configure, "bridge.delay.hosta.1500") and re.match(perms.read, "bridge.delay.hosta")
    assert not re.match(perms.topic_control_read, "hostb") and re.match(perms.topic_control_read, "hosta")
    # 10,000 entities cost the grant nothing: it does not grow with them
    assert len(for_host("hosta").read) == len(for_host("hosta", [gids.mint("hosta") for _ in range(10_000)]).read)
    assert json.dumps(perms.rabbitmqctl("hosta"))


def _receipt_counts(lab: NetnsLab, host: str) -> dict[str, int]:
    """The receipt counters host ``host``'s ``bridge status`` shows."""
    line = lab.bridge_json(host, "status")["extra"]["receipts"]
    return {name: int(count) for name, count in re.findall(r"([a-z]+) (\d+)", line)}


def test_a_host_cannot_forge_receipts_for_another_hosts_entity(netns_lab: NetnsLab, secure_hosts):
    """B tracks a message to A (whose receipts count) and one to its own second entity (which
    only B may speak for). A, a joined host using only its own grants, forges receipts into
    B's control queue: each kind is dropped and counted, and B's records do not change."""
    lab = netns_lab
    s = secure_hosts
    a, b = s["a"], s["b"]
    user, password = s["creds"]["A"]
    other = register(lab, b, "lp-other")
    to_a = lab.bridge_json(b, "send", s["main"], "receipts please", "--from", "lp-worker", "--force")
    local = lab.bridge_json(b, "send", other, "for B only", "--from", "lp-worker")
    held = lab.bridge_json(b, "track", to_a["msgId"], "--wait", "delivered", "--timeout", "30s")
    assert held["states"]["delivered"]["how"] == "held"  # A's real receipt counts
    before = _receipt_counts(lab, b)

    def item(msg_id: str, to: str, state: str = "read") -> dict[str, Any]:
        return {"msgId": msg_id, "to": to, "state": state, "at": 1.0, "how": "forged"}

    frames = [
        # claims to be B itself: A's user may not speak for host B
        {"v": 1, "host": b, "receipts": [item(local["msgId"], other)]},
        # as A, about B's own entity: not A's to speak for
        {"v": 1, "host": a, "receipts": [item(local["msgId"], other)]},
        # as A, about a message B never sent
        {"v": 1, "host": a, "receipts": [item(str(uuid.uuid4()), s["main"])]},
        # as A, the delivered receipt again: a duplicate
        {"v": 1, "host": a, "receipts": [item(to_a["msgId"], s["main"], "delivered")]},
        # as A, a malformed item next to nothing else
        {"v": 1, "host": a, "receipts": [{"msgId": "x", "state": "read"}]},
    ]

    def publish(ch) -> None:
        ch.confirm_delivery()
        props = pika.BasicProperties(type="RECEIPT", user_id=user, delivery_mode=2)
        for frame in frames:
            ch.basic_publish(topology.CONTROL, b, json.dumps(frame).encode(), props)
        ch.basic_publish(topology.CONTROL, b, b"\xff not json", props)
        ch.basic_publish(topology.CONTROL, b, b"[" * 100_000, props)

    assert _refused(lab, user, password, publish) == 0  # the broker lets A write to B's key: B must check
    expected = {"forged": 2, "unknown": 1, "duplicate": 1, "bad": 3}
    wait_for(
        lambda: all(_receipt_counts(lab, b)[k] - before[k] >= n for k, n in expected.items()),
        what=f"B to count the forged receipts ({expected})",
    )
    after = _receipt_counts(lab, b)
    assert after["recorded"] == before["recorded"]  # nothing forged was recorded
    assert "read" not in lab.bridge_json(b, "track", local["msgId"])["states"]
    assert "read" not in lab.bridge_json(b, "track", to_a["msgId"])["states"]
    # B's gateway is still fine: a real read receipt from A still counts
    assert [m["msgId"] for m in poll(lab, a, s["main"])] == [to_a["msgId"]]
    read = lab.bridge_json(b, "track", to_a["msgId"], "--wait", "read", "--timeout", "30s")
    assert read["states"]["read"]["how"] == "poll"
