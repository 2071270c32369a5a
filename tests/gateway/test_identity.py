"""Sender identity check (pure): fromHost must match the broker-authenticated user."""

from __future__ import annotations

from types import SimpleNamespace

from bridgecli import gids
from bridgecli.envelope import Envelope
from bridgecli.gateway.identity import IdentityPolicy, check_sender, verify

HOST = IdentityPolicy(mode="host")


def test_off_accepts_anything():
    assert check_sender(IdentityPolicy(), user_id=None, from_host="hosta") is None
    assert check_sender(IdentityPolicy(), user_id="mallory", from_host="hosta") is None


def test_host_mode_requires_the_host_user():
    assert check_sender(HOST, user_id="hosta", from_host="hosta") is None
    problem = check_sender(HOST, user_id="hostb", from_host="hosta")
    assert problem and "'hosta'" in problem and "'hostb'" in problem


def test_missing_user_or_host_is_refused_under_the_check():
    assert "no authenticated user_id" in check_sender(HOST, user_id=None, from_host="hosta")
    assert "no fromHost" in check_sender(HOST, user_id="hosta", from_host=None)


def test_template_and_trusted_users():
    policy = IdentityPolicy(mode="host", host_user="bridge-{host}", trusted_users=frozenset({"ops"}))
    assert check_sender(policy, user_id="bridge-hosta", from_host="hosta") is None
    assert check_sender(policy, user_id="hosta", from_host="hosta") is not None
    assert check_sender(policy, user_id="ops", from_host="anything") is None


def test_roster_host_must_agree_with_from_host():
    assert check_sender(HOST, user_id="hostb", from_host="hostb", roster_host="hostb") is None
    problem = check_sender(HOST, user_id="hostb", from_host="hostb", roster_host="hosta")
    assert problem and "announced on host 'hosta'" in problem


def test_verify_reads_config_values_and_roster():
    env = Envelope(
        kind="SEND",
        sender="4b0c3a5e-1111-4222-8333-444455556666",
        recipient="4b0c3a5e-1111-4222-8333-444455556667",
        content="hi",
        sender_host="hostb",
        user_id="hostb",
    )
    values = {"security.sender_check": "host", "security.host_user": "{host}", "security.trusted_users": " ops , "}
    roster = SimpleNamespace(get=lambda gid: SimpleNamespace(host="hosta"))
    assert verify(values, env) is None
    assert "announced on host 'hosta'" in verify(values, env, roster)
    assert verify({**values, "security.sender_check": "off"}, env, roster) is None
    assert IdentityPolicy.from_config(values).trusted_users == frozenset({"ops"})


def test_a_sender_gid_must_not_belong_to_another_host():
    from bridgecli.roster import RosterView

    values = {"security.sender_check": "host"}
    view = RosterView(local_host="hosta")  # knows hosta (and so its tag) from the start

    def env(sender: str) -> Envelope:
        return Envelope(
            kind="SEND", sender=sender, recipient=gids.mint("hosta"), content="hi", sender_host="hostb", user_id="hostb"
        )

    # minted on hostb: its own, whatever the roster says (the roster can lag or be absent)
    assert verify(values, env(gids.mint("hostb")), view) is None
    assert verify(values, env(gids.mint("hostb"))) is None
    # minted on hosta, claimed by hostb: refused, though nothing announces it
    assert "announced on host 'hosta' (or carries its tag)" in verify(values, env(gids.mint("hosta")), view)
    # a gid minted before tags whose host nobody knows (offline): accepted, as before tags
    assert verify(values, env("4b0c3a5e-1111-4222-8333-444455556666"), view) is None


def test_speaks_for_needs_the_hosts_own_user_under_the_check():
    policy = IdentityPolicy.from_config({"security.sender_check": "host", "security.trusted_users": "ops"})
    assert policy.speaks_for("hostb", "hostb") and policy.speaks_for("ops", "hostb")
    assert not policy.speaks_for("hosta", "hostb") and not policy.speaks_for(None, "hostb")
    assert IdentityPolicy.from_config({}).speaks_for(None, "hostb"), "the check off trusts the claim"
