"""Channels between two hosts on one broker: one send to ``#NAME`` gives every member exactly
one copy in its own inbox, leaving is honoured, and each kind of bad input has its own exit
code. Real gateways and ``bridge`` subprocesses (docs/channels.md)."""

from __future__ import annotations

import time

import pytest

from bridgecli.errors import ExitCode
from tests.support.hosts import Host


def _pair(host_factory) -> tuple[Host, Host]:
    a, b = host_factory("chana"), host_factory("chanb")
    for host in (a, b):
        host.start_gateway()
    return a, b


def _members(host: Host, name: str) -> set[str]:
    listed = host.bridge_json("channel", "list", name)["channels"]
    return {m["label"] for m in listed[0]["members"]}


def _until_members(host: Host, name: str, wanted: set[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _members(host, name) == wanted:
            return
        time.sleep(0.2)
    raise AssertionError(f"{host.name} lists {_members(host, name)} in #{name}, not {wanted}")


def _drain(host: Host, label: str, wanted: int, timeout: float = 20.0) -> list[dict]:
    """Poll ``label`` until it has ``wanted`` messages, then a little longer for any extra."""
    got: list[dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(got) < wanted:
        got += host.bridge_json("poll", "--as", label, "--wait", "1s")["messages"]
    got += host.bridge_json("poll", "--as", label, "--wait", "1s")["messages"]
    return got


@pytest.mark.slow
def test_each_member_on_each_host_gets_one_copy_and_leaving_is_honoured(host_factory):
    a, b = _pair(host_factory)
    a.register("lead", role="main")
    a.register("rev1")
    b.register("rev2")
    b.register("rev3")
    b.register("outsider")
    for host, label in ((a, "lead"), (a, "rev1"), (b, "rev2"), (b, "rev3")):
        joined = host.bridge_json("channel", "join", "reviewers", "--as", label)
        assert joined["joined"] is True and joined["channel"] == "reviewers"
    again = a.bridge_json("channel", "join", "#reviewers", "--as", "rev1")
    assert again["joined"] is False
    everyone = {"lead", "rev1", "rev2", "rev3"}
    _until_members(a, "reviewers", everyone)
    _until_members(b, "reviewers", everyone)

    sent = a.bridge_json("send", "#reviewers", "please review PR 7", "--from", "lead")
    for host, label in ((a, "rev1"), (b, "rev2"), (b, "rev3")):
        got = _drain(host, label, 1)
        assert [(m["content"], m.get("copyOf"), m.get("channel")) for m in got] == [
            ("please review PR 7", sent["msgId"], "reviewers")
        ], label
    assert _drain(b, "outsider", 0) == []
    assert _drain(a, "lead", 0) == []  # the sender does not get its own message back

    # a reply to a copy goes to the sender, answering the id the sender knows
    copy = None
    b.bridge_json("send", "#reviewers", "second", "--from", "rev2")
    for host, label in ((a, "rev1"), (b, "rev3"), (a, "lead")):
        [copy] = _drain(host, label, 1)
        assert copy["content"] == "second"
    assert _drain(b, "rev2", 0) == []
    assert copy is not None
    a.bridge_json("reply", copy["msgId"], "on it", "--from", "lead")
    [answer] = _drain(b, "rev2", 1)
    assert answer["content"] == "on it" and answer["inReplyTo"] == copy["copyOf"]

    # leaving is honoured
    b.bridge_json("channel", "leave", "reviewers", "--as", "rev2")
    _until_members(a, "reviewers", everyone - {"rev2"})
    a.bridge_json("send", "#reviewers", "third", "--from", "lead")
    assert [m["content"] for m in _drain(b, "rev3", 1)] == ["third"]
    assert [m["content"] for m in _drain(a, "rev1", 1)] == ["third"]
    assert _drain(b, "rev2", 0) == []


@pytest.mark.slow
def test_bad_input_has_its_own_exit_codes(host_factory):
    a = host_factory("chanc")
    a.start_gateway()
    a.register("solo")
    bad = a.bridge("channel", "join", "Not A Name", "--as", "solo")
    assert bad.returncode == ExitCode.BAD_CHANNEL, bad.stderr
    assert "is not a channel name" in bad.stderr
    bad_send = a.bridge("send", "#no.dots", "x", "--from", "solo")
    assert bad_send.returncode == ExitCode.BAD_CHANNEL, bad_send.stderr
    not_in = a.bridge("channel", "leave", "ops", "--as", "solo")
    assert not_in.returncode == ExitCode.NOT_A_MEMBER, not_in.stderr
    assert "not in channel #ops" in not_in.stderr
    empty = a.bridge("send", "#ops", "anyone?", "--from", "solo")
    assert empty.returncode == ExitCode.EMPTY_CHANNEL, empty.stderr
    assert "channel #ops has no members" in empty.stderr
    waiting = a.bridge("send", "#ops", "x", "--from", "solo", "--wait", "5s")
    assert waiting.returncode == ExitCode.CONFIG, waiting.stderr
    assert "--wait cannot be used with a channel" in waiting.stderr


def _send_once_publishing(host: Host, *args: str, timeout: float = 60.0) -> None:
    """``bridge send`` as soon as the gateway publishes again: after a broker restart its publish
    lane reconnects on a backoff of its own, after the consuming connection. One message id for
    every try, so a try that did reach the broker is dropped as a repeat."""
    import uuid

    msg_id = str(uuid.uuid4())
    deadline = time.monotonic() + timeout
    while True:
        proc = host.bridge("send", *args, "--id", msg_id)
        if proc.returncode != ExitCode.BROKER_UNAVAILABLE or time.monotonic() > deadline:
            assert proc.returncode == 0, proc.stderr
            return
        time.sleep(0.2)


@pytest.mark.slow
def test_membership_survives_broker_and_gateway_restarts(host_factory, rabbitmq_node_factory):
    import pika

    node = rabbitmq_node_factory([])
    a = host_factory("chand", broker_uri=node.uri)
    a.start_gateway()
    a.register("boss", role="main")
    member = a.register("ops1")
    a.bridge_json("channel", "join", "ops", "--as", "ops1")
    node.restart()
    a.wait_connected(60)
    _send_once_publishing(a, "#ops", "after the broker restarted", "--from", "boss")
    assert [m["content"] for m in _drain(a, "ops1", 1)] == ["after the broker restarted"]
    # a binding lost while the gateway was down is made again when it starts: the registry is
    # the record of who is a member
    a.stop_gateway()
    connection = pika.BlockingConnection(pika.URLParameters(node.uri))
    connection.channel().queue_unbind(f"agent.{member}.inbox", "bridge.msg", routing_key="chan.ops")
    connection.close()
    # without a gateway the send goes straight to the broker, which finds no member
    lost = a.bridge("send", "#ops", "nobody bound", "--from", "boss")
    assert lost.returncode == ExitCode.EMPTY_CHANNEL, lost.stderr
    a.start_gateway()
    assert _members(a, "ops") == {"ops1"}
    a.bridge_json("send", "#ops", "after the gateway restarted", "--from", "boss")
    assert [m["content"] for m in _drain(a, "ops1", 1)] == ["after the gateway restarted"]


@pytest.mark.slow
def test_hostile_channel_copies_are_dead_lettered_and_the_gateway_keeps_serving(host_factory, rabbitmq):
    import uuid

    import pika

    from bridgecli import channels
    from tests.test_channels import channel_body

    a = host_factory("chane")
    a.start_gateway()
    member = a.register("m1")
    outsider = a.register("o1")
    a.bridge_json("channel", "join", "sec", "--as", "m1")

    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq.uri))
    channel = connection.channel()
    # an inbox bound to the channel behind bridge's back: its entity never joined
    channel.queue_bind(f"agent.{outsider}.inbox", "bridge.msg", routing_key="chan.sec")
    channel.confirm_delivery()
    sec = {"ts": time.time(), "to": channels.channel_gid("sec"), "channel": "sec"}
    forged_copy = channel_body(**sec, copyOf=str(uuid.uuid4()), content="forged copy")
    channel.basic_publish("bridge.msg", "chan.sec", forged_copy, pika.BasicProperties(message_id="hostile-copy"))
    real = channel_body(**sec, content="real")
    channel.basic_publish("bridge.msg", "chan.sec", real, pika.BasicProperties(message_id="fine"))
    connection.close()
    assert [m["content"] for m in _drain(a, "m1", 1)] == ["real"]
    assert _drain(a, "o1", 0) == []

    def reasons() -> dict[str, set[str]]:
        rows = a.bridge_json("dlq", "list", "--limit", "1000")["dead_letters"]
        found: dict[str, set[str]] = {}
        for row in rows:
            found.setdefault(row["queue"], set()).add(row["reason"])
        return found

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(reasons()) < 2:
        time.sleep(0.2)
    assert reasons() == {
        f"agent.{member}.inbox": {"bad_field"},
        f"agent.{outsider}.inbox": {"not_a_member", "bad_field"},
    }
    assert a.gateway is not None and a.gateway.poll() is None
