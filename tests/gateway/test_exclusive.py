"""One consumer per inbox, enforced by the broker: a second gateway with a copy of this host's
files (a cloned VM, a restored snapshot, a home on NFS) splits nothing and says so."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pika
import pika.exceptions

from tests.multihost.helpers import wait_for
from tests.support.hosts import Host


def _clone(host: Host, rabbitmq) -> Host:
    """A second installation with a copy of ``host``'s registry, store and config, and the
    same host id: what a cloned VM runs. Its runtime dir (gateway socket) is its own."""
    root = Path(tempfile.mkdtemp(prefix="hclone", dir="/tmp"))
    clone = Host(host.name, root, rabbitmq.uri)
    for kind in ("DATA", "STATE", "CONFIG"):
        key = f"XDG_{kind}_HOME"
        shutil.copytree(host.env[key], clone.env[key], dirs_exist_ok=True)
    return clone


def test_a_cloned_host_splits_nothing_and_reports_the_conflict(host_factory, rabbitmq):
    a = host_factory("a")
    main = a.register("main", role="main")
    a.start_gateway()
    clone = _clone(a, rabbitmq)
    try:
        clone.start_gateway()
        status = wait_for(lambda: (s := clone.bridge_json("status"))["elsewhere"] and s, 30,
                          what="the clone's conflict")
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
        assert [m["content"] for m in clone.bridge_json("poll", "--as", main, "--wait", "10s")["messages"]] \
            == ["after take-over"]
    finally:
        clone.close()
        shutil.rmtree(clone.root, ignore_errors=True)


def test_a_foreign_consumer_on_a_served_inbox_is_refused(host_factory, rabbitmq):
    a = host_factory("a")
    main = a.register("main", role="main")
    a.start_gateway()
    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq.uri))
    try:
        channel = connection.channel()
        try:
            channel.basic_consume(f"agent.{main}.inbox", lambda *args: None)
            raise AssertionError("the broker let a second consumer onto a served inbox")
        except pika.exceptions.ChannelClosedByBroker as exc:
            assert exc.reply_code == 403 and "exclusive" in exc.reply_text
    finally:
        connection.close()
    a.bridge("send", main, "still served", "--from", "main", check=True)
    assert [m["content"] for m in a.bridge_json("poll", "--as", main, "--wait", "10s")["messages"]] \
        == ["still served"]
