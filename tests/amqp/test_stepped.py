"""SteppedConnection: a SelectConnection driven in steps, on pika's public API only."""

from __future__ import annotations

import threading

import pytest

from bridgecli import config
from bridgecli.amqp import topology
from bridgecli.amqp.stepped import SteppedConnection, Stepper
from bridgecli.errors import BrokerUnavailable, Conflict


def _config(uri: str) -> config.Config:
    return config.load({"broker.uri": uri})


def test_it_opens_reports_the_broker_and_runs_calls_from_other_threads(rabbitmq):
    conn = SteppedConnection(_config(rabbitmq.uri), name="test-stepped")
    try:
        assert conn.is_open
        assert conn.server_info()["product"] == "RabbitMQ"
        ran: list[str] = []
        thread = threading.Thread(target=lambda: conn.after_step(lambda: ran.append("called")))
        thread.start()
        thread.join()
        conn.process_data_events(time_limit=5)  # returns early: a call came in
        assert ran == ["called"]
        channel = conn.channel(5, "test")
        got: list[object] = []
        channel.queue_declare("stepped.test", auto_delete=True, callback=conn.arrived(got))
        conn.wait_for(got, 5, "no declare-ok")
        assert got[0].method.queue == "stepped.test"
    finally:
        conn.close()
    assert not conn.is_open


def test_a_call_run_inside_the_loop_goes_out_in_the_same_step(rabbitmq):
    stepper = Stepper()
    conn = SteppedConnection(_config(rabbitmq.uri), name="test-stepped-in-loop", stepper=stepper)
    try:
        channel = conn.channel(5, "test")
        got: list[object] = []
        threads: list[int] = []

        def declare() -> None:  # what a publish does: write a frame, wait for nothing
            threads.append(threading.get_ident())
            channel.queue_declare("stepped.in-loop", auto_delete=True, callback=conn.arrived(got))

        caller = threading.Thread(target=lambda: stepper.next_turn(declare))
        caller.start()
        caller.join()
        conn.wait_for(got, 5, "no declare-ok")  # one wait: the call, its frame and the answer
        assert threads == [threading.get_ident()] and got[0].method.queue == "stepped.in-loop"
    finally:
        conn.close()
        stepper.close()


def test_after_step_from_inside_the_loop_ends_the_step_and_runs_outside_it(rabbitmq):
    stepper = Stepper()
    conn = SteppedConnection(_config(rabbitmq.uri), name="test-stepped-after-step", stepper=stepper)
    try:
        seen: list[bool] = []
        stepper.ioloop.call_later(0, lambda: conn.after_step(lambda: seen.append(stepper.stepping)))
        conn.process_data_events(time_limit=30)  # returns at once: the callback ended the step
        assert seen == [False]  # it ran between steps, where it may wait for the broker
    finally:
        conn.close()
        stepper.close()


def test_its_declares_wait_and_report_a_conflict_as_ours(rabbitmq):
    conn = SteppedConnection(_config(rabbitmq.uri), name="test-stepped")
    try:
        queue = topology.Queue("stepped.conflict", durable=False, auto_delete=True)
        holder = conn.sync_channel(5, "declare")
        topology.declare(holder, queue)  # the queue exists once this returns
        other = conn.sync_channel(5, "declare")
        with pytest.raises(Conflict, match="already exists on the broker with other arguments"):
            topology.declare(other, topology.Queue("stepped.conflict", durable=True))
        assert not other.is_open and holder.is_open  # only the failed declare's channel closed
        holder.close()
    finally:
        conn.close()


def test_refused_credentials_read_as_our_error(rabbitmq):
    scheme, rest = rabbitmq.uri.split("://", 1)
    bad = f"{scheme}://nobody:wrong@{rest.rsplit('@', 1)[-1]}"
    with pytest.raises(BrokerUnavailable, match="refused the credentials"):
        SteppedConnection(_config(bad), name="test-stepped")
