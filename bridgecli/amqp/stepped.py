"""A pika ``SelectConnection`` on an I/O loop driven in steps by the one thread that owns it,
with asynchronous channels.

Why: the gateway's connections want channels whose callbacks (confirms, deliveries) run
straight from the I/O loop, and a loop they step themselves between their own work, shared by
several connections and sockets on one thread, on pika's public API only
(docs/decisions/pika-public-api.md).

The loop's one vocabulary, used everywhere: :meth:`Stepper.now`, :meth:`Stepper.later` and
:meth:`Stepper.next_turn` run a callback inside the loop (where it must not wait);
:meth:`SteppedConnection.after_step` runs one outside it, between steps (where it may).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pika
import pika.exceptions
from pika.adapters.select_connection import IOLoop
from pika.adapters.utils import connection_workflow

from bridgecli.amqp.connection import cut_while_opening, parameters, refused
from bridgecli.amqp.deadlines import Deadlines
from bridgecli.errors import BrokerUnavailable

if TYPE_CHECKING:
    from bridgecli.amqp.sync_channel import SyncChannel
    from bridgecli.config import Config


class Stepper:
    """One thread's pika I/O loop, run in steps: a step ends after its time or once woken. Every
    connection and socket served on the loop shares it, so a wake-up ends the step whoever
    runs it. Owning thread only, but for :meth:`wake_threadsafe`, :meth:`on_loop_thread`,
    :meth:`now`, :meth:`later` and :meth:`next_turn`."""

    def __init__(self) -> None:
        self.ioloop = IOLoop()
        #: timeouts that are mostly cancelled before they are due (:mod:`.deadlines`)
        self.deadlines = Deadlines(self.ioloop)
        #: the thread that steps the loop (:meth:`bind`), by ``threading.get_ident()``
        self._owner: int | None = None
        #: the thread running the current step, if one runs
        self._stepper_ident: int | None = None
        #: a step is running: the caller is inside one of the loop's callbacks, where nothing
        #: may wait for the broker (the loop cannot be stepped again from there)
        self.stepping = False
        #: the current step is ending (:meth:`wake` stops the loop once per step)
        self._waking = False
        #: callbacks for :meth:`later`, and whether a loop timer runs them
        self._later: deque[Callable[[], None]] = deque()
        self._later_timer = False

    def step(self, seconds: float) -> None:
        """Run the loop until it is woken or for ``seconds`` (not from inside the loop)."""
        self._waking = False
        timer = self.deadlines.call_later(seconds, self.wake)
        self._stepper_ident = threading.get_ident()
        self.stepping = True
        try:
            self.ioloop.start()
        finally:
            self.stepping = False
            self.deadlines.cancel(timer)
            self._waking = False

    def wake(self) -> None:
        """End the current step once the loop has handled what it polled (owning thread)."""
        if not self._waking:
            self._waking = True
            self.ioloop.stop()

    def now(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` inside the loop: at once on the loop's thread, else on its next turn."""
        if threading.get_ident() == self._owner:
            fn()
        else:
            self.next_turn(fn)

    def later(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` inside the loop once the callback that asks has returned (on the loop's
        thread; from another, on the loop's next turn). What several callbacks ask for in one
        turn shares one loop timer, and what ``fn`` asks for runs in the same turn. Why: a loop
        timer costs more than the callbacks it usually runs (a hand-off per delivery)."""
        if threading.get_ident() != self._owner:
            self.next_turn(fn)
            return
        self._later.append(fn)
        if not self._later_timer:
            self._later_timer = True
            self.ioloop.call_later(0, self._run_later)

    def _run_later(self) -> None:
        queue = self._later
        try:
            while queue:
                queue.popleft()()
        finally:  # a failure leaves the loop as any loop callback's does; the rest runs next turn
            self._later_timer = bool(queue)
            if queue:
                self.ioloop.call_later(0, self._run_later)

    def next_turn(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` inside the loop on its next turn (from any thread): no step ends for it,
        so what it writes goes out in the same step. ``fn`` must not wait for the broker."""
        self.ioloop.add_callback_threadsafe(fn)

    def wake_threadsafe(self) -> None:
        """End the current step (from any thread)."""
        self.ioloop.add_callback_threadsafe(self.ioloop.stop)

    def in_step(self) -> bool:
        """Whether the caller runs inside the current step (a callback of the loop)."""
        return self.stepping and threading.get_ident() == self._stepper_ident

    def bind(self) -> None:
        """Make the calling thread the one that steps the loop."""
        self._owner = threading.get_ident()

    def on_loop_thread(self) -> bool:
        """Whether the caller is the thread bound to the loop (:meth:`bind`)."""
        return threading.get_ident() == self._owner

    def close(self) -> None:
        self.ioloop.close()


class SteppedConnection:
    """An open connection; every method but :meth:`after_step` belongs to the owning thread.
    A lost connection raises its pika error from :meth:`process_data_events`, as a
    ``BlockingConnection`` does, so the same reconnect loops serve both."""

    def __init__(self, config: Config, name: str, connect_timeout: float = 5.0, stepper: Stepper | None = None) -> None:
        #: ``stepper``: the loop the owning thread keeps across connections (it also serves other
        #: sockets and connections); this connection then leaves it open when it closes
        self._owns_loop = stepper is None
        self._stepper = stepper or Stepper()
        self._ioloop = self._stepper.ioloop
        #: calls from other threads, run between steps (outside the loop, so they may wait)
        self._calls: deque[Callable[[], None]] = deque()
        self._lost: BaseException | None = None
        self._closing = False
        self._running_calls = False
        params = parameters(config, name=name, connect_timeout=connect_timeout)
        done: list[Any] = []
        workflow = pika.SelectConnection.create_connection(params, self.arrived(done), custom_ioloop=self._ioloop)
        try:
            self._step_until(lambda: bool(done), connect_timeout * 2 + 1)
        except ValueError as exc:
            done.append(cut_while_opening(exc))
        if not done:
            workflow.abort()
            self._stepper.step(0)
            self._close_loop()
            raise refused(TimeoutError("connection timed out"), params, config, connect_timeout)
        result = done[0]
        if isinstance(result, BaseException):
            self._close_loop()
            raise refused(_last_attempt_error(result), params, config, connect_timeout) from None
        self.connection: pika.SelectConnection = result
        self.connection.add_on_close_callback(self._on_closed)

    @property
    def is_open(self) -> bool:
        return self.connection.is_open and self._lost is None

    def server_info(self) -> dict[str, Any]:
        """The broker's product, version and cluster name (shown by ``bridge status``)."""
        properties = self.connection.server_properties or {}
        return {
            k: (v.decode() if isinstance(v, bytes) else v)
            for k, v in properties.items()
            if k in ("product", "version", "cluster_name")
        }

    def process_data_events(self, time_limit: float = 0.0) -> None:
        """Run the I/O loop for up to ``time_limit`` seconds (0: what is ready now; less when a
        call comes in), then the calls :meth:`after_step` queued, unless one of those is
        running; raise the connection's error if it was lost."""
        self._stepper.step(time_limit)
        self.run_calls()

    def process_ready(self, max_steps: int = 64) -> None:
        """:meth:`process_data_events` with no wait, again while a step read bytes (at most
        ``max_steps`` times): one step reads one socket buffer (128 KiB), so a 1 MiB frame
        would otherwise wait for eight of its caller's wake-ups."""
        for _ in range(max_steps):
            before = self.connection.bytes_received
            self.process_data_events(0)
            if self.connection.bytes_received == before:
                return

    def run_calls(self) -> None:
        """Run the queued calls (see :meth:`process_data_events`) without stepping the loop;
        raise the connection's error if it was lost."""
        if not self._running_calls:  # a call that steps the loop itself runs no other call
            self._running_calls = True
            try:
                while self._calls and self._lost is None:
                    self._calls.popleft()()
            finally:
                self._running_calls = False
        if self._lost is not None:
            raise self._lost

    def after_step(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the owning thread once the current step ends, outside the loop, so it
        may wait for the broker (declare a queue, open a channel); from any thread, or from a
        callback of the loop, which this ends at once (a consumer's delivery handed over)."""
        self._calls.append(fn)
        if self._stepper.in_step():
            self._stepper.wake()
        else:
            self._stepper.wake_threadsafe()

    def channel(self, timeout: float, what: str) -> Any:
        """A new asynchronous ``pika.channel.Channel``; BrokerUnavailable naming ``what`` when
        the broker does not open it within ``timeout`` seconds."""
        opened: list[Any] = []
        self.connection.channel(on_open_callback=self.arrived(opened))
        self.wait_for(opened, timeout, f"the broker did not open the {what} channel")
        return opened[0]

    def wait_for(self, arrived: list[Any], timeout: float, problem: str) -> None:
        """Step until a callback has appended to ``arrived``; BrokerUnavailable(``problem``)
        after ``timeout`` seconds, the connection's error if it was lost meanwhile."""
        self.wait_until(lambda: bool(arrived), timeout)
        if not arrived:
            raise BrokerUnavailable(problem, "check the broker's log")

    def sync_channel(self, timeout: float, what: str, calls_timeout: float | None = None) -> SyncChannel:
        """A channel whose calls wait for the broker's answer as a ``BlockingChannel``'s do
        (:mod:`.sync_channel`); each waits up to ``calls_timeout`` s (None: until the
        connection is lost), the opening up to ``timeout``."""
        from bridgecli.amqp.sync_channel import SyncChannel

        return SyncChannel(self, self.channel(timeout, what), calls_timeout)

    def wake(self) -> None:
        """End the current step once the loop has handled what it polled (owning thread)."""
        self._stepper.wake()

    def wait_until(self, ready: Callable[[], bool], timeout: float | None) -> None:
        """Step until ``ready()`` (a callback that makes it true calls :meth:`wake`), the
        connection is lost (its error is raised), or ``timeout`` s (None: no limit)."""
        self._step_until(ready, timeout)
        if self._lost is not None:
            raise self._lost

    def close(self, timeout: float = 2.0) -> None:
        """Close the connection, and its loop unless it was given one (waits up to ``timeout``
        for the broker's close-ok)."""
        self._closing = True
        closed: list[Any] = []
        if self.connection.is_open:
            self.connection.add_on_close_callback(self.arrived(closed))
            try:
                self.connection.close()
            except pika.exceptions.ConnectionWrongStateError:
                closed.append(True)
            self._step_until(lambda: bool(closed), timeout)
        self._close_loop()

    def _close_loop(self) -> None:
        if self._owns_loop:
            self._stepper.close()

    def arrived(self, into: list[Any]) -> Callable[..., None]:
        """A callback that records its first argument in ``into`` and ends the current step
        (see :meth:`wait_for`)."""

        def record(first: Any = None, *_: Any) -> None:
            into.append(first)
            self.wake()

        return record

    def _on_closed(self, _connection: Any, reason: BaseException) -> None:
        if not self._closing and self._lost is None:
            self._lost = reason if isinstance(reason, Exception) else pika.exceptions.ConnectionClosed(0, str(reason))
        self.wake()

    def _step_until(self, ready: Callable[[], bool], timeout: float | None) -> None:
        """Step the loop until ``ready()``, the connection is lost, or ``timeout`` s (None: no
        limit), at most a second at a time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not ready() and self._lost is None:
            left = 1.0 if deadline is None else min(deadline - time.monotonic(), 1.0)
            if left <= 0:
                return
            self._stepper.step(left)


def _last_attempt_error(error: BaseException) -> BaseException:
    """The error of the last connection attempt, as ``BlockingConnection`` reports it."""
    if isinstance(error, connection_workflow.AMQPConnectionWorkflowFailed):
        error = error.exceptions[-1]
        if isinstance(error, connection_workflow.AMQPConnectorSocketConnectError):
            return pika.exceptions.AMQPConnectionError(error)
        if isinstance(error, connection_workflow.AMQPConnectorPhaseErrorBase):
            return error.exception
    return error
