"""One consumer per inbox, enforced by the broker: a second gateway with a copy of this host's
files (a cloned VM, a restored snapshot, a home on NFS) splits nothing and says so.

Both queue types: classic inboxes are consumed exclusively; quorum inboxes (a cluster) ignore
that flag and are declared single-active-consumer instead. The quorum case runs in a vhost of
its own, so its quorum ``bridge.dlq`` does not meet the session's classic one.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pika
import pika.exceptions
import pytest

from tests.multihost.helpers import wait_for
from tests.support.hosts import Host

QUORUM = {"BRIDGE_MESSAGING_INBOX_QUEUE_TYPE": "quorum"}


@pytest.fixture(params=["classic", "quorum"])
def broker(request, rabbitmq) -> tuple[str, dict[str, str]]:
    """``(uri, env)`` for hosts of one queue type."""
    if request.param == "classic":
        return rabbitmq.uri, {}
    return request.getfixturevalue("vhost_uri"), QUORUM


def _clone(host: Host, uri: str, env: dict[str, str]) -> Host:
    """A second installation with a copy of ``host``'s registry, store and config, and the
    same host id: what a cloned VM runs. Its runtime dir (gateway socket) is its own."""
    root = Path(tempfile.mkdtemp(prefix="hclone", dir="/tmp"))
    clone = Host(host.name, root, uri, env)
    for kind in ("DATA", "STATE", "CONFIG"):
        key = f"XDG_{kind}_HOME"
        shutil.copytree(host.env[key], clone.env[key], dirs_exist_ok=True)
    return clone


def test_a_cloned_host_splits_nothing_and_reports_the_conflict(host_factory, broker):
    uri, env = broker
    a = host_factory("a", broker_uri=uri, extra_env=env)
    main = a.register("main", role="main")
    a.start_gateway()
    clone = _clone(a, uri, env)
    try:
        clone.start_gateway()
        status = wait_for(
            lambda: (s := clone.bridge_json("status"))["elsewhere"] and s, 30, what="the clone's conflict"
        )
        assert set(status["elsewhere"]) == {f"agent.{main}.inbox", f"control.{a.name}"}
        assert [e["elsewhere"] for e in status["entities"]] == [True]
        assert "consumed by another client" in clone.log_path.read_text()
        assert "consumed by another client" in clone.bridge("status").stdout
        doctor = clone.bridge("doctor", "--json")
        assert "consumed by another client" in doctor.stdout
        for n in range(20):
            a.bridge("send", main, f"m{n}", "--from", "main", check=True)
        got = a.bridge_json("poll", "--as", main, "--wait", "10s", "--limit", "100")["messages"]
        while len(got) < 20:
            more = a.bridge_json("poll", "--as", main, "--wait", "5s")["messages"]
            assert more, f"only {len(got)} of 20 reached the original"
            got += more
        assert sorted(m["content"] for m in got) == sorted(f"m{n}" for n in range(20))
        assert clone.bridge_json("poll", "--as", main, "--wait", "1s")["messages"] == []
        # the original goes away: the clone takes over by itself
        a.stop_gateway()
        wait_for(lambda: not clone.bridge_json("status")["elsewhere"], 60, what="the clone's take-over")
        assert "free again; serving it here" in clone.log_path.read_text()
        clone.bridge("send", main, "after take-over", "--from", "main", check=True)
        assert [m["content"] for m in clone.bridge_json("poll", "--as", main, "--wait", "10s")["messages"]] == [
            "after take-over"
        ]
    finally:
        clone.close()
        shutil.rmtree(clone.root, ignore_errors=True)


def test_a_foreign_consumer_on_a_served_inbox_gets_nothing(host_factory, broker):
    """Classic: the broker refuses the second consumer (403). Quorum: it accepts it as a
    standby that receives nothing while the gateway's consumer is active."""
    uri, env = broker
    a = host_factory("a", broker_uri=uri, extra_env=env)
    main = a.register("main", role="main")
    a.start_gateway()
    a.wait_connected()
    connection = pika.BlockingConnection(pika.URLParameters(uri))
    stolen: list[bytes] = []
    try:
        channel = connection.channel()
        try:
            channel.basic_consume(f"agent.{main}.inbox", lambda ch, method, props, body: stolen.append(body))
            assert env == QUORUM, "the broker let a second consumer onto a served classic inbox"
        except pika.exceptions.ChannelClosedByBroker as exc:
            assert env != QUORUM and exc.reply_code == 403 and "exclusive" in exc.reply_text
        for n in range(5):
            a.bridge("send", main, f"still served {n}", "--from", "main", check=True)
        got = a.bridge_json("poll", "--as", main, "--wait", "10s")["messages"]
        while len(got) < 5:
            more = a.bridge_json("poll", "--as", main, "--wait", "5s")["messages"]
            assert more, f"only {len(got)} of 5 reached the gateway; the foreign consumer has {len(stolen)}"
            got += more
        connection.process_data_events(0.5)
        assert stolen == [] and sorted(m["content"] for m in got) == [f"still served {n}" for n in range(5)]
    finally:
        connection.close()
