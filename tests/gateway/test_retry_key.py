"""Retry-safe sends: ``--key`` and the CLI's own retry of a send whose confirm was lost.

Each test ends by sending a last message (no key) and reading the recipient's hold until it
is there: an inbox is one FIFO queue, so by then every earlier copy has been through the
receiving gateway's dedup, and what the hold has is all that was delivered.
"""

from __future__ import annotations

import uuid

from tests.support.confirm_loss import ConfirmLossProxy


def _delivered(host, worker: str, sender: str) -> list[tuple[str, str]]:
    """Send a last message to ``worker`` as ``sender`` and collect ``(msgId, content)`` of
    everything held for it up to that one (a channel copy by the id its sender knows)."""
    last = host.bridge_json("send", worker, "last", "--from", sender)["msgId"]
    got: list[tuple[str, str]] = []
    while last not in [msg_id for msg_id, _ in got]:
        messages = host.bridge_json("poll", "--as", worker, "--wait", "20s")["messages"]
        assert messages, f"nothing more arrived; so far {got}"
        got += [(m.get("copyOf") or m["msgId"], m["content"]) for m in messages]
    return got[:-1]


def test_the_same_key_twice_is_one_delivery_and_another_sender_is_another(host_factory):
    """Through a gateway: the second send with the same --key gets the same msgId and is
    dropped by the receiver; the same key from another sender is a message of its own."""
    a = host_factory("a")
    a.start_gateway()
    worker = a.register("worker")
    a.register("main", role="main")
    a.register("other")
    first = a.bridge_json("send", worker, "deploy", "--from", "main", "--key", "job-42")["msgId"]
    again = a.bridge_json("send", worker, "deploy (rerun)", "--from", "main", "--key", "job-42")["msgId"]
    theirs = a.bridge_json("send", worker, "deploy", "--from", "other", "--key", "job-42")["msgId"]
    assert first == again != theirs
    crew = f"crew-{uuid.uuid4().hex[:8]}"  # the broker is shared: a channel of this test's own
    a.bridge_json("channel", "join", crew, "--as", "worker")
    to_crew = [
        a.bridge_json("send", f"#{crew}", "all hands", "--from", "main", "--key", "call-1")["msgId"] for _ in "12"
    ]
    assert to_crew[0] == to_crew[1] not in (first, theirs)
    assert _delivered(a, worker, "main") == [(first, "deploy"), (theirs, "deploy"), (to_crew[0], "all hands")]


def test_the_same_key_twice_without_a_gateway_is_one_delivery(host_factory):
    """On the direct path (no gateway runs while sending) the key derives the same id."""
    a = host_factory("a")
    worker = a.register("worker")
    a.register("main", role="main")
    sent = [a.bridge_json("send", worker, f"try {n}", "--from", "main", "--key", "nightly")["msgId"] for n in (1, 2)]
    assert sent[0] == sent[1]
    a.start_gateway()
    assert _delivered(a, worker, "main") == [(sent[0], "try 1")]


def test_a_bad_key_is_a_usage_error(host_factory):
    a = host_factory("a")
    proc = a.bridge("send", "nobody", "hi", "--key", "has space")
    assert proc.returncode == 2, proc.stderr
    assert "Error: bad --key 'has space': a key is 1-128 ASCII letters, digits and _.:@/+=-" in proc.stderr


def test_a_lost_confirm_is_retried_and_delivered_once_through_the_gateway(host_factory, rabbitmq):
    """The gateway's publish lane loses its connection after the broker took the message but
    before its confirm came back: `bridge send` tries again with the same id, succeeds, and
    the recipient gets one copy."""
    with ConfirmLossProxy(rabbitmq.uri) as proxy:
        a = host_factory("a", broker_uri=proxy.uri)
        a.start_gateway()
        worker = a.register("worker")
        a.register("main", role="main")
        sent = a.bridge_json("send", worker, "exactly once", "--from", "main")["msgId"]
        assert proxy.confirms_lost == 1
        assert _delivered(a, worker, "main") == [(sent, "exactly once")]


def test_a_lost_confirm_is_retried_and_delivered_once_without_a_gateway(host_factory, rabbitmq):
    """The same on the direct path: its own connection is cut with the publish unconfirmed."""
    with ConfirmLossProxy(rabbitmq.uri) as proxy:
        a = host_factory("a", broker_uri=proxy.uri)
        worker = a.register("worker")
        a.register("main", role="main")
        sent = a.bridge_json("send", worker, "exactly once", "--from", "main", "--key", "k1")["msgId"]
        assert proxy.confirms_lost == 1
        a.start_gateway()
        assert _delivered(a, worker, "main") == [(sent, "exactly once")]
