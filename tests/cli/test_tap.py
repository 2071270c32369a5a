"""`bridge tap` against a live stream: it sees every message, never takes one from an inbox,
and never lets a message's control characters reach the terminal."""

from __future__ import annotations

import json
import subprocess

import pika

from bridgecli.sanitize import is_inert
from tests.support.env import BRIDGE_BIN


def _tap(host, *args: str) -> subprocess.Popen:
    tap = subprocess.Popen(
        [BRIDGE_BIN, "tap", "--count", "3", *args],
        env=host.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert "tapping bridge.msg" in tap.stderr.readline()  # bound: it sees what comes next
    return tap


def test_tap_sees_the_stream_and_takes_nothing(host_factory, rabbitmq):
    a = host_factory("a")
    main = a.register("main", role="main")
    a.register("peer")
    a.start_gateway()
    as_json, human = _tap(a, "--json"), _tap(a)
    first = a.bridge_json("send", main, "hello", "--from", "peer")
    second = a.bridge_json("send", main, "\x1b[2J\x1b]0;pwned\x07 wipe", "--from", "peer")
    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq.uri))
    connection.channel().basic_publish("bridge.msg", main, b"not json")
    connection.close()
    out, err = as_json.communicate(timeout=30)
    assert as_json.returncode == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r.get("msgId") for r in rows[:2]] == [first["msgId"], second["msgId"]]
    assert rows[1]["content"] == "\x1b[2J\x1b]0;pwned\x07 wipe"  # JSON carries it exactly, escaped
    assert rows[2]["invalid"] and rows[2]["routing_key"] == main
    out, err = human.communicate(timeout=30)
    assert human.returncode == 0 and len(out.splitlines()) == 3, err
    assert is_inert(out.replace("\n", "")) and "wipe" in out and "INVALID" in out
    # nothing was taken from the inbox: both valid messages are held for main
    got = a.bridge_json("poll", "--as", main, "--wait", "5s")["messages"]
    assert [m["msgId"] for m in got] == [first["msgId"], second["msgId"]]
    shown = a.bridge("show", second["msgId"]).stdout
    assert is_inert(shown.replace("\n", "")) and "wipe" in shown
