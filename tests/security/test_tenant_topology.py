"""A joined host is a tenant: with nothing but the credentials ``bridge join`` gave it, it can
neither change the shared topology nor copy, answer, stop or speak for another host.

Each case plays a hostile hostB against a real hub (``bridge hub start``) in network
namespaces, with the broker's own answers checked: 403 where a permission refuses, or the
frame ignored by the gateway that reads it.
"""

from __future__ import annotations

import json
import time
import uuid

import pika
import pika.exceptions
import pytest

from bridgecli import gids
from bridgecli.envelope import Envelope
from tests.multihost.helpers import poll, register, wait_for
from tests.multihost.hub_lab import as_host
from tests.support.netns import NetnsLab

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def _refused(lab: NetnsLab, action) -> int:
    """The reply code with which the broker refused ``action(channel)`` done as hostB (0: allowed)."""

    def attempt(connection):
        channel = connection.channel()
        channel.confirm_delivery()  # a publish waits for its answer: a refusal raises here
        try:
            action(channel)
        except pika.exceptions.ChannelClosedByBroker as exc:
            return exc.reply_code
        return 0

    return as_host(lab, "hostB", attempt)


def _own_queue() -> str:
    """A queue name hostB may declare (one of its own reply queues)."""
    return f"bridge.reply.hostb.{uuid.uuid4()}"


def test_no_shared_object_can_be_deleted_or_redeclared(hub_lab: NetnsLab):
    lab = hub_lab
    for exchange, kind in (("bridge.msg", "topic"), ("bridge.roster", "topic"), ("bridge.ctl", "topic")):
        assert _refused(lab, lambda ch, e=exchange: ch.exchange_delete(e)) == 403, exchange
        assert _refused(lab, lambda ch, e=exchange: ch.exchange_declare(e, "fanout", durable=True)) == 403, exchange
        assert _refused(lab, lambda ch, e=exchange, k=kind: ch.exchange_declare(e, k, durable=True)) == 403, exchange
    assert _refused(lab, lambda ch: ch.exchange_delete("bridge.dlx")) == 403
    assert _refused(lab, lambda ch: ch.queue_delete("bridge.dlq")) == 403
    assert _refused(lab, lambda ch: ch.queue_purge("bridge.dlq")) == 403
    assert _refused(lab, lambda ch: ch.queue_declare("bridge.dlq", durable=True, arguments={"x-max-length": 1})) == 403
    # the hub's delay exchange and tiers are the hub's: a pending delayed message stays
    main = register(lab, "hub", "t-delay")
    lab.bridge("hub", "send", main, "later", "--from", "t-delay", "--delay", "10m")
    tier = "bridge.delay.hub.600000"
    assert _refused(lab, lambda ch: ch.queue_delete(tier)) == 403
    assert _refused(lab, lambda ch: ch.queue_purge(tier)) == 403
    assert _refused(lab, lambda ch: ch.exchange_delete("bridge.delay.hub")) == 403
    # checking that they exist is allowed (a joined gateway does it at connect)
    assert _refused(lab, lambda ch: ch.exchange_declare("bridge.msg", passive=True)) == 0
    assert as_host(lab, "hostB", lambda c: c.channel().queue_declare(tier, passive=True).method.message_count) == 1


def test_no_copy_of_other_hosts_traffic_can_be_bound(hub_lab: NetnsLab):
    lab = hub_lab

    def bind(exchange: str, key: str = "", arguments: dict | None = None):
        def action(channel):
            queue = _own_queue()
            channel.queue_declare(queue, exclusive=True, auto_delete=True)
            channel.queue_bind(queue, exchange, routing_key=key, arguments=arguments)

        return action

    assert _refused(lab, bind("bridge.dlx")) == 403  # every host's dead letters
    assert _refused(lab, bind("bridge.delay.hub", arguments={"x-match": "any"})) == 403  # delayed messages
    assert _refused(lab, bind("bridge.ctl", "hub")) == 403  # the hub's spawn requests
    assert _refused(lab, bind("bridge.ctl", f"reply.hub.{uuid.uuid4()}")) == 403  # the hub's answers
    assert _refused(lab, bind("bridge.ctl", "#")) == 403
    assert _refused(lab, bind("bridge.msg", "#")) == 403
    assert _refused(lab, bind("bridge.control", "hub")) in (403, 404)  # the retired direct exchange
    # its own keys are fine
    assert _refused(lab, bind("bridge.ctl", f"reply.hostb.{uuid.uuid4()}")) == 0


def _hostb_reply_queue(channel) -> tuple[str, str]:
    queue = _own_queue()
    key = "reply." + queue.removeprefix("bridge.reply.")
    channel.queue_declare(queue, exclusive=True, auto_delete=True)
    channel.queue_bind(queue, "bridge.ctl", routing_key=key)
    return queue, key


def _control_request(lab: NetnsLab, payload: dict, user_id: str = "hostb") -> dict | None:
    """Publish a control request to the hub as hostB and return its answer (None: none came)."""

    def work(connection):
        channel = connection.channel()
        queue, key = _hostb_reply_queue(channel)
        channel.confirm_delivery()
        channel.basic_publish(
            "bridge.ctl",
            "hub",
            json.dumps({"v": 1, **payload}).encode(),
            pika.BasicProperties(reply_to=key, correlation_id="c1", user_id=user_id, expiration="30000"),
            mandatory=True,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            method, _props, body = channel.basic_get(queue, auto_ack=True)
            if method is not None:
                answer = json.loads(body)
                if not answer.get("accepted"):
                    return answer
            else:
                connection.process_data_events(time_limit=0.2)
        return None

    return as_host(lab, "hostB", work)


def test_another_hosts_entity_cannot_be_stopped(hub_lab: NetnsLab):
    lab = hub_lab
    victim = register(lab, "hub", "t-victim")
    # hostB asks, as itself: it did not spawn the entity, so it is refused, and says why
    answer = _control_request(lab, {"type": "stop", "gid": victim, "requester": {"host": "hostb"}})
    assert answer is not None and answer["ok"] is False, answer
    assert answer["error"]["code"] == "PERMISSION" and "may not stop t-victim" in answer["error"]["message"]
    # hostB claims to be the hub: the request does not speak for the hub, so nobody answers it
    assert _control_request(lab, {"type": "stop", "gid": victim, "requester": {"host": "hub"}}) is None
    entities = lab.bridge_json("hub", "entities", "--json")["entities"]
    assert victim in [e["gid"] for e in entities], "the entity is still registered"
    # its gid stays the hub's: hostB can neither bind it nor read its inbox
    assert _refused(lab, lambda ch: ch.basic_get(f"agent.{victim}.inbox")) == 403


def test_a_message_claiming_the_hub_is_not_delivered_on_the_hub(hub_lab: NetnsLab):
    lab = hub_lab
    main = register(lab, "hub", "t-main", role="main")
    forged = Envelope(
        kind="SEND", sender=main, recipient=main, content="rm -rf", sender_host="hub", sender_label="t-main"
    )

    def publish(connection):
        channel = connection.channel()
        channel.confirm_delivery()
        # no user_id at all: RabbitMQ checks it only when present
        channel.basic_publish("bridge.msg", main, forged.to_bytes(), pika.BasicProperties(**forged.amqp_properties()))

    as_host(lab, "hostB", publish)
    # and one from hostB's own tag, claiming the hub's gid as its sender
    theirs = Envelope(kind="SEND", sender=main, recipient=main, content="me too", sender_host="hostb")
    as_host(
        lab,
        "hostB",
        lambda c: c.channel().basic_publish(
            "bridge.msg", main, theirs.to_bytes(), pika.BasicProperties(**theirs.amqp_properties(), user_id="hostb")
        ),
    )
    genuine = lab.bridge_json("hub", "send", main, "genuine", "--from", "t-main")
    got = wait_for(lambda: poll(lab, "hub", main, wait="5s"), what="the genuine message")
    assert [m["msgId"] for m in got] == [genuine["msgId"]]
    forgeries = {forged.msg_id, theirs.msg_id}

    def dead_letters() -> list[dict]:
        rows = lab.bridge_json("hub", "dlq", "list", "--json")["dead_letters"]
        found = [d for d in rows if d["id"] in forgeries]
        return found if len(found) == len(forgeries) else []

    dead = wait_for(dead_letters, what="both forgeries dead-lettered")
    assert {d["id"] for d in dead} == forgeries
    assert all(d["reason"] == "sender_mismatch" for d in dead)


def test_gids_carry_their_hosts_tag():
    assert gids.minted_on(gids.mint("hub"), "hub") and not gids.minted_on(gids.mint("hub"), "hostb")
