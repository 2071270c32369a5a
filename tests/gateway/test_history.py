"""Message history end to end: a real gateway archives what its entities send and receive;
``bridge history`` searches it from either side, ``bridge thread`` shows a conversation, and a
corrupt archive is set aside at start while delivery goes on (docs/history.md)."""

from __future__ import annotations

from pathlib import Path

from bridgecli.sanitize import UNSAFE
from tests.support.hosts import Host


def _archive_path(host: Host) -> Path:
    return Path(host.env["XDG_STATE_HOME"]) / "bridge" / "archive.db"


def _history(host: Host, *args: str) -> list[dict]:
    return host.bridge_json("history", *args)["messages"]


def _receive(host: Host, gid: str) -> list[dict]:
    return host.bridge_json("poll", "--as", gid, "--wait", "20s")["messages"]


def test_history_search_from_both_sides_and_the_thread(host_factory):
    host = host_factory("hist")
    host.start_gateway()
    alice, bob = host.register("h-alice", role="main"), host.register("h-bob")
    asked = host.bridge_json("ask", "h-bob", "is the zanzibar rollout done?", "--from", "h-alice")
    [got] = _receive(host, bob)
    answered = host.bridge_json("answer", got["msgId"], "zanzibar rollout finished", "--from", "h-bob")
    _receive(host, alice)
    host.bridge_json("send", "h-bob", "unrelated chatter", "--from", "h-alice")
    _receive(host, bob)
    for side, gid in (("h-alice", alice), ("h-bob", bob)):
        found = _history(host, "--as", side, "--search", "zanz*")
        assert [m["msgId"] for m in found] == [answered["msgId"], asked["msgId"]]  # newest first
        assert {m["owner"] for m in found} == {gid}
        assert [m["direction"] for m in found] == (["received", "sent"] if side == "h-alice" else ["sent", "received"])
    assert len(_history(host, "--search", "rollout")) == 4  # each side's copy of both messages
    assert len(_history(host, "--with", "h-bob", "--as", "h-alice")) == 3
    # a sent message carries its receipts: bob's poll pulled the ask
    alices = _history(host, "--as", "h-alice", "--search", "zanzibar")
    [sent_ask] = [m for m in alices if m["direction"] == "sent"]
    assert sent_ask["msgId"] == asked["msgId"] and {"sent", "delivered", "read"} <= set(sent_ask["states"])
    assert all("states" not in m for m in alices if m["direction"] == "received")
    assert "[read]" in host.bridge("history", "--as", "h-alice", "--search", "done").stdout
    chain = host.bridge_json("thread", answered["msgId"][:8])["messages"]
    assert [(m["kind"], m["content"]) for m in chain] == [
        ("ASK", "is the zanzibar rollout done?"),
        ("ANSWER", "zanzibar rollout finished"),
    ]
    shown = host.bridge("thread", asked["msgId"], check=True).stdout
    assert "ASK" in shown and "ANSWER" in shown and shown.index("ASK") < shown.index("ANSWER")
    assert host.bridge_json("status")["extra"]["archive"].startswith("archived ")
    # hostile content: kept as sent, inert on the terminal
    hostile = "pwned \x1b]0;title\x07 \x1b[2J\x1b[201~ clear\r\n\x9b31m done"
    host.bridge("send", bob, hostile, "--from", "h-alice", check=True)
    _receive(host, bob)
    shown = host.bridge("history", "--search", "pwned", check=True).stdout
    assert "pwned" in shown and not any(ord(ch) in UNSAFE for ch in shown)
    assert [m["content"] for m in _history(host, "--search", "pwned")] == [hostile, hostile]  # sent, received


def test_a_corrupt_archive_is_set_aside_at_start_and_delivery_goes_on(host_factory):
    host = host_factory("hist")
    path = _archive_path(host)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00garbage, not an SQLite file\xff" * 512)
    host.expect_log_errors("message archive was corrupt")
    host.start_gateway()
    target = host.register("h-after")
    host.bridge("send", target, "still delivered", check=True)
    assert [m["content"] for m in _receive(host, target)] == ["still delivered"]
    assert "set aside 1" in host.bridge_json("status")["extra"]["archive"]
    assert "message archive was corrupt" in host.whole_log()
    assert list(path.parent.glob("archive.db.corrupt-*"))
    assert [m["content"] for m in _history(host, "--search", "delivered", "--as", "h-after")] == ["still delivered"]


def test_a_channel_message_is_one_message_in_a_thread(host_factory):
    host = host_factory("hist")
    host.start_gateway()
    lead = host.register("c-lead", role="main")
    members = [host.register(label) for label in ("c-m1", "c-m2")]
    for label in ("c-m1", "c-m2"):
        host.bridge_json("channel", "join", "crew", "--as", label)
    sent = host.bridge_json("send", "#crew", "who takes the walrus ticket?", "--from", "c-lead")
    copies = [_receive(host, gid)[0] for gid in members]
    host.bridge_json("reply", copies[0]["msgId"], "walrus is mine", "--from", "c-m1")
    _receive(host, lead)
    rows = _history(host, "--channel", "crew")
    # (the broker's confirm may come after the local deliveries: the order is not fixed)
    assert sorted((m["direction"], m["copyOf"] or "") for m in rows) == [
        ("received", sent["msgId"]),
        ("received", sent["msgId"]),
        ("sent", ""),
    ]
    for start in (sent["msgId"], copies[1]["msgId"]):  # the original, or any member's copy
        thread = host.bridge_json("thread", start)["messages"]
        assert [m["content"] for m in thread] == ["who takes the walrus ticket?", "walrus is mine"]
