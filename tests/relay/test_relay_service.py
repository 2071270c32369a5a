"""Two real ``bridge relay`` processes on the session broker: one is fed and publishes, the
other stands by; ``kill -9`` of the active one and the standby publishes at once. Relay
frames are read as any gateway would, on a queue bound ``relay.#``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pika
import pytest

from bridgecli import relay_frames, roster_frames
from bridgecli.amqp import topology
from tests.multihost.helpers import wait_for as _until
from tests.support.hosts import Host
from tests.support.relay import Relay


class Listener:
    """A plain pika consumer of relay frames (``relay.#``) and of one reply queue."""

    def __init__(self, uri: str) -> None:
        self.connection = pika.BlockingConnection(pika.URLParameters(uri))
        self.channel = self.connection.channel()
        topology.declare_shared(self.channel)  # a fresh broker: no gateway declared them yet
        name = self.channel.queue_declare("", exclusive=True, auto_delete=True).method.queue
        self.channel.queue_bind(name, topology.ROSTER, routing_key="relay.#")
        self.replies = topology.reply_queue("asker")
        topology.declare(self.channel, self.replies)
        self.frames: list[tuple[str, relay_frames.RelayFrame]] = []
        for queue in (name, self.replies.name):
            self.channel.basic_consume(queue, self._on_frame, auto_ack=True)

    def _on_frame(self, _ch: Any, method: Any, props: Any, body: bytes) -> None:
        frame = relay_frames.parse_relay_frame(body)
        assert frame is not None, body[:200]
        self.frames.append((str(method.routing_key), frame))

    def publish(self, key: str, body: bytes) -> None:
        self.channel.basic_publish(topology.ROSTER, key, body)

    def pump(self) -> None:
        self.connection.process_data_events(time_limit=0.1)

    def close(self) -> None:
        if self.connection.is_open:
            self.connection.close()


@pytest.fixture
def relay_lab(host_factory, rabbitmq) -> Iterator[tuple[Host, Listener, list[Relay]]]:
    host = host_factory("relay")
    listener = Listener(rabbitmq.uri)
    relays: list[Relay] = []
    try:
        yield host, listener, relays
    finally:
        for relay in relays:
            relay.end()
        listener.close()


def test_the_standby_relay_takes_over_when_the_active_one_is_killed(relay_lab):
    host, listener, relays = relay_lab
    tag = uuid.uuid4().hex[:6]
    first, second = f"ra-{tag}", f"rb-{tag}"
    relays.append(Relay(host, first))
    _until(relays[0].serving, what="the first relay serving")
    relays.append(Relay(host, second))
    _until(relays[1].serving, what="the second relay serving")
    seq = 0
    beating = f"hosta-{tag}"

    def heard_from(name: str) -> Callable[[], relay_frames.RelayFrame | None]:
        def look() -> relay_frames.RelayFrame | None:
            nonlocal seq
            listener.publish(
                f"roster.{beating}._gateway",
                roster_frames.host_frame(host=beating, version="9", interval=5.0, seq=seq, full=True, items=[]),
            )
            seq += 1
            listener.pump()
            rows = [f for key, f in listener.frames if key == relay_frames.relay_key(name) and not f.answer]
            return next((f for f in reversed(rows) if any(r.host == beating for r in f.alive)), None)

        return look

    frame = _until(heard_from(first), what=f"relay frames of {first}")
    assert frame.relay == first
    assert not [f for key, f in listener.frames if key == relay_frames.relay_key(second)]  # the standby is silent

    # a gateway that joins asks the active relay for the whole view, on its own reply key
    reply = listener.replies.bindings[0].routing_key
    listener.publish("roster.asker._gateway", roster_frames.sync_frame(host="asker", reply=reply))

    def answered() -> relay_frames.RelayFrame | None:
        listener.pump()
        return next((f for key, f in listener.frames if key == reply), None)

    answer = _until(answered, what="the sync answer")
    assert answer.answer and beating in [f["host"] for f in answer.frames]

    relays[0].kill()
    frame = _until(heard_from(second), what=f"relay frames of {second} after the kill")
    assert frame.relay == second and frame.epoch != answer.epoch

    relays[1].end()
    assert relays[1].proc.returncode == 0, relays[1].text()
