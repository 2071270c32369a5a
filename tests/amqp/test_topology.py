"""Topology as data: the names and arguments of docs/protocol.md."""

from __future__ import annotations

from bridgecli.amqp import topology


def test_design_names_and_types():
    assert {(e.name, e.type, e.durable) for e in topology.SHARED_EXCHANGES} == {
        ("bridge.msg", "topic", True),
        ("bridge.roster", "topic", True),
        ("bridge.ctl", "topic", True),
        ("bridge.dlx", "fanout", True),
    }
    assert topology.DEAD_LETTER_QUEUE.name == "bridge.dlq"
    assert topology.DEAD_LETTER_QUEUE.bindings[0].exchange == "bridge.dlx"


def test_inbox_queue():
    q = topology.inbox_queue("g1")
    assert q.name == "agent.g1.inbox" and q.durable and not q.exclusive
    assert q.arguments["x-dead-letter-exchange"] == "bridge.dlx"
    assert q.bindings[0].exchange == "bridge.msg" and q.bindings[0].routing_key == "g1"
    quorum = topology.inbox_queue("g1", "quorum", 7)
    assert quorum.arguments["x-queue-type"] == "quorum" and quorum.arguments["x-delivery-limit"] == 7


def test_control_roster_and_delay_queues():
    c = topology.control_queue("hosta")
    assert c.name == "control.hosta" and c.durable and c.bindings[0].routing_key == "hosta"
    r = topology.roster_queue("hosta")
    assert r.name == "roster.hosta" and r.exclusive and r.auto_delete and not r.durable
    assert r.bindings[0].routing_key == "roster.#"
    d = topology.delay_queue("hosta", 1500)
    assert d.name == "bridge.delay.hosta.1500"
    assert d.arguments["x-message-ttl"] == 1500 and d.arguments["x-dead-letter-exchange"] == "bridge.msg"
    assert d.bindings[0].exchange == topology.delay_exchange("hosta").name == "bridge.delay.hosta"
    assert d.bindings[0].arguments == {"x-match": "all", "x-delay": 1500}


def test_reply_queues_carry_their_host_in_name_and_key():
    q = topology.reply_queue("hosta")
    assert q.name.startswith("bridge.reply.hosta.") and q.exclusive and q.auto_delete
    key = q.bindings[0].routing_key
    assert q.bindings[0].exchange == "bridge.ctl" and key == "reply." + q.name.removeprefix("bridge.reply.")
    assert topology.reply_key_host(key) == "hosta"
    assert topology.reply_key_host("hostb") is None
    assert topology.reply_key_host("reply.hosta.not-a-uuid") is None
    assert topology.reply_key_host("bridge.reply.hosta." + key[-36:]) is None
