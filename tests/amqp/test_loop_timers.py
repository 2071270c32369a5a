"""The loop's own timers: deadlines behind one pika timer, and callbacks run soon after the
one that asks. On a real pika I/O loop, stepped."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from bridgecli.amqp.deadlines import Deadlines
from bridgecli.amqp.stepped import Stepper


class _Counting:
    """A real pika I/O loop's timers, counted: what :class:`Deadlines` asks of pika."""

    def __init__(self, stepper: Stepper) -> None:
        self._ioloop = stepper.ioloop
        self.armed: list[float] = []
        self.removed = 0

    def call_later(self, delay: float, callback: Any) -> Any:
        self.armed.append(delay)
        return self._ioloop.call_later(delay, callback)

    def remove_timeout(self, handle: Any) -> None:
        self.removed += 1
        self._ioloop.remove_timeout(handle)


def _step_until(stepper: Stepper, ready: Any) -> None:
    for _ in range(500):
        if ready():
            return
        stepper.step(0.01)
    raise AssertionError("not ready after 500 steps")


def test_deadlines_run_in_order_and_cancelled_ones_never():
    stepper = Stepper()
    deadlines, ran = Deadlines(stepper.ioloop), []
    for name, delay in (("c", 0.03), ("a", 0.0), ("gone", 0.01), ("b", 0.02)):
        handle = deadlines.call_later(delay, lambda name=name: ran.append(name))
    deadlines.cancel(handle)  # "b"
    gone = deadlines.call_later(0.01, lambda: ran.append("gone too"))
    deadlines.cancel(gone)
    deadlines.cancel(gone)  # twice: nothing more
    assert len(deadlines) == 3
    _step_until(stepper, lambda: len(ran) == 3)
    assert ran == ["a", "gone", "c"] and len(deadlines) == 0
    stepper.close()


def test_cancelled_deadlines_cost_pika_no_timer():
    """A held wait or a confirm that ends in time leaves nothing in pika's heap; only the
    earliest deadline is armed there."""
    stepper = Stepper()
    loop = _Counting(stepper)
    deadlines = Deadlines(loop)
    for _ in range(1000):
        deadlines.cancel(deadlines.call_later(30.0, lambda: None))
    assert (len(loop.armed), loop.removed) == (1, 0)  # the first, armed once
    ran: list[str] = []
    deadlines.call_later(0.0, lambda: ran.append("sooner"))  # earlier than the armed one
    assert (len(loop.armed), loop.removed) == (2, 1)
    _step_until(stepper, lambda: ran)
    assert len(deadlines) == 0
    stepper.close()


def test_a_deadline_armed_by_a_callback_does_not_delay_an_earlier_one():
    stepper = Stepper()
    loop = _Counting(stepper)
    deadlines, ran = Deadlines(loop), []

    def first() -> None:
        ran.append("first")
        deadlines.call_later(60.0, lambda: ran.append("much later"))

    deadlines.call_later(0.0, first)
    deadlines.call_later(0.02, lambda: ran.append("second"))
    _step_until(stepper, lambda: len(ran) == 2)
    assert ran == ["first", "second"]
    assert loop.armed[-1] > 50  # armed for "much later" only once "second" ran
    assert max(loop.armed[:-1]) < 1  # "second" was armed for its own time, not the later one's
    stepper.close()


def test_later_runs_after_the_asking_callback_and_in_the_same_turn():
    stepper = Stepper()
    stepper.bind()
    order: list[str] = []

    def in_loop() -> None:
        stepper.later(lambda: order.append("one"))
        stepper.later(two)
        order.append("asked")

    def two() -> None:
        order.append("two")
        stepper.ioloop.call_later(0, lambda: order.append("next turn"))
        stepper.later(lambda: order.append("three"))  # asked from a later callback: this turn

    stepper.ioloop.call_later(0, in_loop)
    _step_until(stepper, lambda: "next turn" in order)
    assert order == ["asked", "one", "two", "three", "next turn"]
    stepper.close()


def test_a_failing_later_callback_leaves_the_step_and_the_rest_run_next():
    stepper = Stepper()
    stepper.bind()
    ran: list[str] = []

    def fails() -> None:
        raise RuntimeError("a bug")

    stepper.ioloop.call_later(0, lambda: (stepper.later(fails), stepper.later(lambda: ran.append("rest"))))
    with pytest.raises(RuntimeError, match="a bug"):
        _step_until(stepper, lambda: ran)
    _step_until(stepper, lambda: ran)
    assert ran == ["rest"]
    stepper.close()


def test_now_runs_at_once_on_the_loop_thread_and_on_the_next_turn_from_another():
    stepper = Stepper()
    stepper.bind()
    order: list[str] = []
    stepper.ioloop.call_later(0, lambda: (stepper.now(lambda: order.append("now")), order.append("after")))
    _step_until(stepper, lambda: "after" in order)
    assert order == ["now", "after"]
    other = threading.Thread(target=lambda: stepper.now(lambda: order.append(threading.current_thread().name)))
    other.start()
    other.join()
    assert order == ["now", "after"]  # not run on the asking thread
    _step_until(stepper, lambda: len(order) == 3)
    assert order[2] == threading.current_thread().name  # run by the loop's thread
    stepper.close()


def test_later_from_another_thread_runs_on_the_loop_thread():
    stepper = Stepper()
    stepper.bind()
    ran: list[str] = []
    other = threading.Thread(target=lambda: stepper.later(lambda: ran.append(threading.current_thread().name)))
    other.start()
    other.join()
    _step_until(stepper, lambda: ran)
    assert ran == [threading.current_thread().name]
    stepper.close()
