"""``bridge dlq retry`` under the sender check: a retried message gets back the ``user_id`` it
was published with, so the recipient's check passes it instead of dead-lettering it again;
a dead letter a host forged for another host's inbox gets none (real gateway, real broker)."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

from bridgecli import dead_letter_queue, gids
from bridgecli.amqp import topology


def _dead(host, msg_id: str) -> list[dict]:
    rows = json.loads(host.bridge("dlq", "list", "--json", check=True).stdout)["dead_letters"]
    return [r for r in rows if r["id"] == msg_id]


def test_a_retried_dead_letter_passes_the_recipients_sender_check(host_factory, tmp_path):
    # the session broker's user is guest: trusted here, so only a missing user_id is refused
    checked = {
        "BRIDGE_MESSAGING_MAX_ATTEMPTS": "2",
        "BRIDGE_SECURITY_SENDER_CHECK": "host",
        "BRIDGE_SECURITY_TRUSTED_USERS": "guest",
    }
    a = host_factory("a", extra_env=checked)
    flag, out = tmp_path / "fixed", tmp_path / "out"
    a.register("main", role="main")
    a.register("flaky", deliver=f"exec:test -e {flag} && cat >> {out}")
    a.start_gateway()
    sent = a.bridge_json("send", "flaky", "try me", "--from", "main")["msgId"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _dead(a, sent):
        time.sleep(0.3)
    assert [r["reason"] for r in _dead(a, sent)] == ["delivery_failed"], a.log()
    flag.touch()
    a.bridge("dlq", "retry", sent, check=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (out.exists() and "try me" in out.read_text()):
        time.sleep(0.2)
    assert out.exists() and "try me" in out.read_text(), _dead(a, sent) or a.log()
    assert _dead(a, sent) == [], "not dead-lettered again as sender_mismatch"


def _props(user_id, queue, claimed):
    headers = {topology.REASON_HEADER: "delivery_failed", topology.QUEUE_HEADER: queue, topology.USER_HEADER: claimed}
    return SimpleNamespace(user_id=user_id, headers=headers)


def test_only_the_inboxs_own_host_vouches_for_a_dead_letters_user():
    theirs, mine = gids.mint("hub"), gids.mint("hostb")
    # hostb dead-lettered a message from its own inbox: what it recorded is restored
    assert dead_letter_queue.original_user(_props("hostb", f"agent.{mine}.inbox", "hub"), frozenset()) == "hub"
    # hostb forged a dead letter for the hub's inbox, claiming the hub's user: nothing restored
    assert dead_letter_queue.original_user(_props("hostb", f"agent.{theirs}.inbox", "hub"), frozenset()) is None
    assert dead_letter_queue.original_user(_props(None, f"agent.{theirs}.inbox", "hub"), frozenset()) is None
    # the broker dead-lettered it (no reason of ours): its own user_id is the original
    assert dead_letter_queue.original_user(SimpleNamespace(user_id="hostb", headers={"x-death": []})) == "hostb"
