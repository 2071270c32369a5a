"""Channels on a hub: one send fans out to members on the hub and on a joined host, each
exactly once, and a joined host can bind only its own entities' inboxes into a channel, by
name only (the broker refuses the rest with 403). A real hub, hostB joined with ``bridge
join``, in network namespaces (docs/channels.md)."""

from __future__ import annotations

import pika.exceptions
import pytest

from bridgecli.amqp import topology
from tests.multihost.helpers import poll, poll_until, register, wait_for
from tests.multihost.hub_lab import as_host
from tests.support.netns import NetnsLab

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def _members(lab: NetnsLab, host: str, name: str) -> set[str]:
    listed = lab.bridge_json(host, "channel", "list", name)["channels"]
    return {f"{m['label']}@{m['host']}" for m in listed[0]["members"]}


def _bind_refused(lab: NetnsLab, queue: str, key: str) -> int:
    """The reply code with which the broker refused hostB binding ``queue`` under ``key``."""

    def attempt(connection):
        try:
            connection.channel().queue_bind(queue, topology.MSG, routing_key=key)
        except pika.exceptions.ChannelClosedByBroker as exc:
            return exc.reply_code
        return 0

    return as_host(lab, "hostB", attempt)


def test_fan_out_across_the_hub_is_exact_and_leaving_is_honoured(hub_lab: NetnsLab):
    lab = hub_lab
    lead = register(lab, "hub", "ct-lead", role="main")
    on_hub = register(lab, "hub", "ct-rev-hub")
    on_b = register(lab, "hostB", "ct-rev-b")
    outsider = register(lab, "hostB", "ct-out-b")
    lab.bridge_json("hub", "channel", "join", "ct-reviewers", "--as", "ct-rev-hub")
    lab.bridge_json("hostB", "channel", "join", "ct-reviewers", "--as", "ct-rev-b")
    both = {"ct-rev-hub@hub", "ct-rev-b@hostb"}
    wait_for(lambda: _members(lab, "hub", "ct-reviewers") == both, what="both members on the hub's list")
    wait_for(lambda: _members(lab, "hostB", "ct-reviewers") == both, what="both members on hostB's list")

    sent = lab.bridge_json("hub", "send", "#ct-reviewers", "review round 1", "--from", lead)
    for host, gid in (("hub", on_hub), ("hostB", on_b)):
        [copy] = poll_until(lab, host, gid, 1)
        assert (copy["content"], copy["copyOf"], copy["user"]) == ("review round 1", sent["msgId"], "hub")
        assert poll(lab, host, gid, "2s") == []  # exactly one
    assert poll(lab, "hostB", outsider, "2s") == []  # non-members never

    lab.bridge_json("hostB", "channel", "leave", "ct-reviewers", "--as", on_b)
    wait_for(lambda: _members(lab, "hub", "ct-reviewers") == {"ct-rev-hub@hub"}, what="hostB's member gone")
    lab.bridge_json("hub", "send", "#ct-reviewers", "review round 2", "--from", lead)
    assert [m["content"] for m in poll_until(lab, "hub", on_hub, 1)] == ["review round 2"]
    assert poll(lab, "hostB", on_b, "3s") == []


def test_a_joined_host_binds_only_its_own_inboxes_and_only_by_name(hub_lab: NetnsLab):
    lab = hub_lab
    theirs = register(lab, "hub", "ct-victim")
    mine = register(lab, "hostB", "ct-mine")
    # another host's entity cannot be put into a channel, nor can a wildcard copy every channel
    assert _bind_refused(lab, topology.inbox_name(theirs), "chan.ct-any") == 403
    assert _bind_refused(lab, topology.inbox_name(mine), "chan.*") == 403
    assert _bind_refused(lab, topology.inbox_name(mine), "chan.#") == 403
    assert _bind_refused(lab, topology.inbox_name(mine), "#") == 403
    # its own entity's inbox, by name, is what `bridge channel join` does
    assert _bind_refused(lab, topology.inbox_name(mine), "chan.ct-own") == 0
    # a copy for a channel the entity never joined (bound behind bridge's back) is refused by
    # the gateway: the registry, not the binding, says who is a member
    lead = register(lab, "hub", "ct-lead2", role="main")
    lab.bridge_json("hub", "channel", "join", "ct-own", "--as", "ct-victim")
    lab.bridge_json("hub", "send", "#ct-own", "for members only", "--from", lead)
    assert [m["content"] for m in poll_until(lab, "hub", theirs, 1)] == ["for members only"]
    assert poll(lab, "hostB", mine, "3s") == []

    def refused_copy() -> bool:
        rows = lab.bridge_json("hub", "dlq", "list", "--limit", "10000")["dead_letters"]
        return any(r["queue"] == topology.inbox_name(mine) and r["reason"] == "not_a_member" for r in rows)

    wait_for(refused_copy, what="the copy dead-lettered as not_a_member")
