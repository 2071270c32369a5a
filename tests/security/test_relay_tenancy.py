"""The roster relay on a real hub: the joined host ``hostB``, with exactly the credentials
join gave it, can neither speak as a relay nor touch the relay's queue; the hub's own relay
(a thread of its registrar) publishes, as broker user ``bridge.relay``, frames hostB hears."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pika
import pika.exceptions
import pytest

from bridgecli import relay_frames
from bridgecli.amqp import topology
from tests.multihost.hub_lab import as_host
from tests.support.netns import NetnsLab

pytestmark = [pytest.mark.netns, pytest.mark.slow]
QUEUE = relay_frames.RELAY_QUEUE


def _refused(connection: Any, attempt: Callable[[Any], Any]) -> int | None:
    """The code the broker closes a new channel with when ``attempt(channel)`` runs, else None."""
    channel = connection.channel()
    channel.confirm_delivery()
    try:
        attempt(channel)
    except pika.exceptions.ChannelClosedByBroker as exc:
        return exc.reply_code
    channel.close()
    return None


def _publish(key: str, user_id: str | None = None) -> Callable[[Any], Any]:
    body = relay_frames.relay_frame(relay="x", epoch="e", seq=1)
    props = pika.BasicProperties(user_id=user_id)
    return lambda ch: ch.basic_publish(topology.ROSTER, key, body, props)


def _own_queue(channel: Any) -> str:
    name = f"bridge.listen.hostb.{uuid.uuid4()}"
    channel.queue_declare(name, exclusive=True, auto_delete=True)
    return name


ATTEMPTS: dict[str, tuple[Callable[[Any], Any], int]] = {
    "publish under relay.x": (_publish("relay.x", "hostb"), 403),
    "publish under relay.hub": (_publish("relay.hub", "hostb"), 403),
    "publish as bridge.relay": (_publish("roster.hostb._gateway", relay_frames.RELAY_USER), 406),
    "consume the relay queue": (lambda ch: ch.basic_consume(QUEUE, lambda *a: None), 403),
    "get from the relay queue": (lambda ch: ch.basic_get(QUEUE), 403),
    "purge the relay queue": (lambda ch: ch.queue_purge(QUEUE), 403),
    "delete the relay queue": (lambda ch: ch.queue_delete(QUEUE), 403),
    "declare the relay queue": (lambda ch: ch.queue_declare(QUEUE, durable=False), 403),
    "bind the relay queue": (lambda ch: ch.queue_bind(QUEUE, topology.ROSTER, routing_key="relay.#"), 403),
    "bind its own queue under one relay's key": (
        lambda ch: ch.queue_bind(_own_queue(ch), topology.ROSTER, routing_key="relay.hub"),
        403,
    ),
}


def test_the_joined_host_can_neither_speak_as_a_relay_nor_touch_its_queue(hub_lab: NetnsLab):
    def attempts(connection: Any) -> dict[str, int | None]:
        return {what: _refused(connection, attempt) for what, (attempt, _) in ATTEMPTS.items()}

    codes = as_host(hub_lab, "hostB", attempts)
    assert codes == {what: code for what, (_, code) in ATTEMPTS.items()}


def test_the_hubs_relay_frames_reach_the_joined_host_as_user_bridge_relay(hub_lab: NetnsLab):
    def hear(connection: Any) -> tuple[str, str | None, relay_frames.RelayFrame | None]:
        channel = connection.channel()
        name = _own_queue(channel)
        channel.queue_bind(name, topology.ROSTER, routing_key="relay.#")  # granted: hosts may hear relays
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            method, props, body = channel.basic_get(name, auto_ack=True)
            if method is None:
                time.sleep(0.2)
                continue
            frame = relay_frames.parse_relay_frame(body)
            if frame is not None and {"hub", "hostb"} <= {row.host for row in frame.alive}:
                return str(method.routing_key), props.user_id, frame
        return "", None, None

    key, user, frame = as_host(hub_lab, "hostB", hear)
    assert frame is not None, "no relay frame naming both hosts within 30 s"
    assert (key, user, frame.relay) == ("relay.hub", relay_frames.RELAY_USER, "hub")
