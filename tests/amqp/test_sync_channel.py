"""SyncChannel: BlockingChannel's calls, results and errors on a stepped connection."""

from __future__ import annotations

import pika
import pika.exceptions
import pytest

from bridgecli import config
from bridgecli.amqp.stepped import SteppedConnection, Stepper


def _open(uri: str, stepper: Stepper | None = None) -> SteppedConnection:
    return SteppedConnection(config.load({"broker.uri": uri}), name="test-sync-channel", stepper=stepper)


def test_calls_answer_and_fail_as_a_blocking_channel_would(rabbitmq):
    conn = _open(rabbitmq.uri)
    try:
        channel = conn.sync_channel(5, "test", calls_timeout=10)
        queue = channel.queue_declare("", exclusive=True).method.queue
        assert channel.basic_get(queue) == (None, None, None)
        channel.confirm_delivery()
        channel.basic_publish("", queue, b"one", pika.BasicProperties(message_id="m1"), mandatory=True)
        method, props, body = channel.basic_get(queue)
        assert (body, props.message_id) == (b"one", "m1")
        channel.basic_ack(method.delivery_tag)
        with pytest.raises(pika.exceptions.UnroutableError):
            channel.basic_publish("", "sync-channel.nobody", b"lost", mandatory=True)
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as closed:
            channel.queue_declare("sync-channel.missing", passive=True)
        assert closed.value.reply_code == 404 and not channel.is_open
    finally:
        conn.close()


def test_deliveries_reach_a_consumer_in_the_loop_or_between_steps(rabbitmq):
    stepper = Stepper()
    conn = _open(rabbitmq.uri, stepper)
    try:
        channel = conn.sync_channel(5, "test", calls_timeout=10)
        queue = channel.queue_declare("", exclusive=True).method.queue
        seen: list[tuple[str, bool]] = []

        def in_loop(ch, method, props, body):  # must not wait: the loop is running it
            seen.append(("in loop", stepper.stepping))
            ch.basic_ack(method.delivery_tag)

        def between(ch, method, props, body):  # may wait for the broker
            ch.queue_declare(queue, passive=True)
            seen.append(("between steps", stepper.stepping))
            ch.basic_ack(method.delivery_tag)

        tag = channel.basic_consume(queue, in_loop, in_loop=True)
        channel.basic_publish("", queue, b"first")
        conn.wait_until(lambda: len(seen) == 1, 10)
        channel.basic_cancel(tag)
        channel.basic_consume(queue, between)
        channel.basic_publish("", queue, b"second")
        while len(seen) < 2:
            conn.process_data_events(time_limit=1)
        assert seen == [("in loop", True), ("between steps", False)]
    finally:
        conn.close()
        stepper.close()
