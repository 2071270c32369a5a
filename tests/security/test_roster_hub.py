"""Roster frames on a real hub: the joined host ``hostB``, with exactly the credentials join
gave it, tries to move the hub's entity onto itself, to speak for the hub through
dead-lettering, and to put terminal escapes on the hub operator's screen."""

from __future__ import annotations

import json
import time
import uuid

import pika
import pika.exceptions
import pytest

from bridgecli import gids, roster
from bridgecli.amqp import topology
from bridgecli.sanitize import is_inert
from tests.multihost.hub_lab import as_host
from tests.support.netns import NetnsLab

pytestmark = [pytest.mark.netns, pytest.mark.slow]
EVIL = "evil\x1b]0;owned\x07\x1b[2J\rfake\x9b31m"


def _frame(host: str, gid: str, label: str) -> bytes:
    entity = type("E", (), {"gid": gid, "label": label, "role": "agent", "backend": "hold", "created": 1.0})
    return roster.heartbeat_frame(host=host, version="0", interval=60, entity=entity, status="idle")


def _hub_roster(lab: NetnsLab) -> dict[str, dict]:
    return {e["gid"]: e for e in json.loads(lab.bridge("hub", "roster", "--json").stdout)["entries"]}


def _hub_refused(lab: NetnsLab) -> dict[str, int]:
    """Frames refused by the hub's view, plus those its roster relay refused (a gateway fed by
    the relay no longer hears hosts' frames itself: the relay judges them first)."""
    extra = json.loads(lab.bridge("hub", "status", "--json").stdout)["extra"]
    counts = dict(extra.get("roster_refused") or {})
    for reason, count in ((extra.get("roster_relay") or {}).get("refused") or {}).items():
        counts[reason] = counts.get(reason, 0) + count
    return counts


def _wait_until(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def _hub_entity(lab: NetnsLab) -> str:
    gid = lab.bridge("hub", "register", "--label", f"hubent-{uuid.uuid4().hex[:4]}", "--deliver", "hold").stdout
    gid = gid.strip()
    assert gids.minted_on(gid, "hub")
    _wait_until(lambda: gid in _hub_roster(lab))
    return gid


def test_the_joined_host_cannot_move_the_hubs_entity_onto_itself(hub_lab: NetnsLab):
    lab = hub_lab
    mine = _hub_entity(lab)
    label = _hub_roster(lab)[mine]["label"]

    def claim(connection) -> bool:
        channel = connection.channel()
        channel.confirm_delivery()
        try:
            channel.basic_publish("bridge.roster", roster.routing_key("hostb", mine), _frame("hostb", mine, "stolen"))
        except pika.exceptions.ChannelClosedByBroker as exc:
            assert exc.reply_code == 403
            return False  # the broker's topic permissions stop it before any view
        return True

    if as_host(lab, "hostB", claim):
        _wait_until(lambda: _hub_refused(lab).get("foreign_gid", 0) >= 1)
    entry = _hub_roster(lab)[mine]
    assert (entry["host"], entry["label"]) == ("hub", label)


def test_a_frame_dead_lettered_under_the_hubs_key_is_ignored(hub_lab: NetnsLab):
    """The broker checks no topic permission when it dead-letters, but it keeps the headers
    that say so, and the original publisher's user_id."""
    lab = hub_lab
    forged = gids.mint("hub")

    def dead_letter(connection) -> None:
        body = _frame("hub", forged, "dl-forged")
        args = {
            "x-dead-letter-exchange": topology.ROSTER,
            "x-dead-letter-routing-key": roster.routing_key("hub", forged),
            "x-message-ttl": 0,
        }
        for name in (f"bridge.reply.hostb.{uuid.uuid4()}", f"bridge.reply.{uuid.uuid4()}"):
            channel = connection.channel()
            try:
                channel.queue_declare(name, exclusive=True, auto_delete=True, arguments=args)
                channel.queue_bind(name, topology.ROSTER, routing_key="roster.#")
                break
            except pika.exceptions.ChannelClosedByBroker:
                continue
        else:
            raise AssertionError("hostB could declare no queue of its own")
        channel.confirm_delivery()
        props = pika.BasicProperties(user_id="hostb")
        channel.basic_publish(topology.ROSTER, roster.routing_key("hostb", roster.GATEWAY_KEY), body, props)
        time.sleep(1)  # let the queue dead-letter before the exclusive queue goes with us

    as_host(lab, "hostB", dead_letter)
    _wait_until(lambda: _hub_refused(lab).get("dead_lettered", 0) >= 1)
    assert forged not in _hub_roster(lab)


def test_an_escape_in_a_label_never_reaches_the_hub_operators_terminal(hub_lab: NetnsLab):
    lab = hub_lab
    evil = gids.mint("hostb")

    def announce(connection) -> None:
        channel = connection.channel()
        channel.confirm_delivery()
        props = pika.BasicProperties(user_id="hostb")
        channel.basic_publish("bridge.roster", roster.routing_key("hostb", evil), _frame("hostb", evil, EVIL), props)

    def shown() -> str | None:
        # announced again each time: hostB's next full host frame retires an entity it does
        # not list, as it should
        as_host(lab, "hostB", announce)
        table = lab.bridge("hub", "roster").stdout
        return table if "evil" in table else None

    table = _wait_until(shown)
    assert is_inert(table.replace("\n", ""))
    assert is_inert(lab.bridge("hub", "roster", "--json").stdout.replace("\n", ""))
