"""The gateway's local socket API: the fast path of one-shot commands on this host.

A Unix socket (mode 0600, in the 0700 user runtime dir) speaking newline-delimited JSON —
the protocol is described in :mod:`bridgecli.gateway.client`. The socket is served on the
gateway's one loop, by its I/O thread, which reads every request. A ``send`` is composed and published
there, with no thread hand-off; ``confirm`` is one store write, done there too. A ``poll``
looks there, and the first wait of either is held there (:mod:`.heldwaits`). Other operations
that may wait, and later waits, run on worker threads (:mod:`.request_threads`). Why:
docs/decisions/local-api-on-the-loop.md.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from bridgecli import paths
from bridgecli.amqp.deadlines import Deadlines
from bridgecli.errors import BridgeError, Conflict, Rejected
from bridgecli.gateway import log as glog
from bridgecli.gateway.api import operations, polling, sending
from bridgecli.gateway.api.answers import ANSWERED, PENDING
from bridgecli.gateway.api.connections import READ, WRITE, Client, ConnectionState, EventLoop, SocketAnswer, line_of
from bridgecli.gateway.api.contract import ApiGateway, WouldWait
from bridgecli.gateway.api.heldwaits import HeldWaits
from bridgecli.gateway.api.request_threads import Workers
from bridgecli.gateway.api.requestlines import (
    MAX_REQUEST_BYTES,
    TOO_LARGE_FIX,
    error_response,
    guarded,
    parse_line,
    raiser,
    response_of,
)
from bridgecli.gateway.events import NO_EVENTS, GatewayEvents
from bridgecli.gateway.publishing import confirm_timed_out
from bridgecli.gateway.waiters import Waiter

logger = logging.getLogger("bridgecli.gateway")
#: operations run on the loop thread itself: they never wait
INLINE = frozenset({"confirm"})


class LoopOwner(Protocol):
    """What owns the loop that serves the socket (the gateway's :class:`~bridgecli.amqp.stepped.Stepper`),
    in the loop's one vocabulary."""

    ioloop: EventLoop
    deadlines: Deadlines

    def on_loop_thread(self) -> bool:
        """Whether the caller runs the loop."""

    def now(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` inside the loop: at once on the loop's thread, else on its next turn."""

    def later(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` inside the loop once the calling callback has returned (any thread)."""

    def next_turn(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` inside the loop on its next turn (any thread)."""


class LocalApi:
    """Binds the socket, serves its clients on ``owner``'s loop, and dispatches requests to
    :data:`operations.OPS`, each called with ``gateway`` (the contract) as its first argument;
    ``events`` counts its requests and error answers."""

    def __init__(
        self, gateway: ApiGateway, owner: LoopOwner, path: Path | None = None, events: GatewayEvents = NO_EVENTS
    ) -> None:
        self.gateway = gateway
        self.events = events
        self.owner = owner
        self.loop = owner.ioloop
        self.deadlines = owner.deadlines
        self.path = path or paths.gateway_socket()
        self.workers = Workers()
        self._listener: socket.socket | None = None
        self._clients: set[Client] = set()
        self.held = HeldWaits(gateway.waiters, self.deadlines, self._on_loop)

    def start(self) -> None:
        paths.ensure_private_dir(self.path.parent)
        if self.path.exists():
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(self.path))
            except OSError:
                self.path.unlink()  # stale socket of a dead gateway
            else:
                raise Conflict(
                    f"a gateway is already running on {self.path}",
                    "stop it first, or give this one other XDG_RUNTIME_DIR / BRIDGE_GATEWAY_SOCKET",
                )
            finally:
                probe.close()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            listener.bind(str(self.path))
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        listener.listen(128)
        listener.setblocking(False)
        self._listener = listener
        self.owner.next_turn(lambda: self.loop.add_handler(listener.fileno(), self._accept, READ))
        glog.event(logger, "socket listening", path=str(self.path))

    def stop(self) -> None:
        """Stop accepting and close idle connections (on the loop thread, waiting for it up to
        5 s); requests in progress finish on their workers."""
        listener, self._listener = self._listener, None
        if listener is None:
            return  # never bound: the socket file (if any) belongs to someone else
        closed = threading.Event()

        def close() -> None:
            self.loop.remove_handler(listener.fileno())
            listener.close()
            for client in list(self._clients):
                if not client.busy:
                    self._drop(client)
            closed.set()

        self.owner.now(close)
        if not closed.wait(5.0):
            listener.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    # --- the loop thread ----------------------------------------------------------------

    def _accept(self, _fd: int, _events: int) -> None:
        while self._listener is not None:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                glog.event(logger, "local API accept failed", logging.WARNING, error=str(exc))
                return
            sock.setblocking(False)
            client = Client(sock, self.loop)
            self._clients.add(client)
            client.watch(self._handler(client))

    def _handler(self, client: Client) -> Callable[[int, int], None]:
        def handle(_fd: int, events: int) -> None:
            try:
                self._readable(client, events)
            except Exception as exc:  # a bug here must not stop the loop: drop only this client
                glog.event(logger, "local API connection failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")
                if client.state is not ConnectionState.DROPPED:  # the bug may have come after the drop
                    client.mark_broken()
                if not client.busy:
                    self._drop(client)

        return handle

    def _readable(self, client: Client, events: int) -> None:
        if events & WRITE:
            client.write_more()
            if client.state is ConnectionState.BROKEN:
                self._hang_up(client)
                return
            if not (events & READ):
                self._next(client)
                return
        try:
            data = client.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            client.inbuf += data
        else:  # a half-close, perhaps: what came before it is still answered
            client.end_input()
        self._next(client)

    def _next(self, client: Client) -> None:
        """Serve the client's buffered requests, one at a time."""
        while client.request is None and client.serving and not client.unwritten:
            end = client.inbuf.find(b"\n")
            if end < 0:
                if len(client.inbuf) > MAX_REQUEST_BYTES:
                    client.inbuf.clear()
                    self._respond(client, error_response(Rejected("request too large", TOO_LARGE_FIX)))
                    continue
                if client.input_ended:  # all it asked is answered, and nothing more will come
                    self._hang_up(client)
                return
            line = bytes(client.inbuf[: end + 1])
            del client.inbuf[: end + 1]
            self._dispatch(client, line)

    def _dispatch(self, client: Client, line: bytes) -> None:
        parsed = parse_line(line)
        if isinstance(parsed, dict):
            self._respond(client, parsed)
            return
        op, request = parsed
        self.events.api_request(op)
        if op in INLINE:
            self._respond(client, self.run(op, request))
            return
        token = client.request = object()
        early = SocketAnswer(client, lambda: self._on_loop(lambda: self._request_done(client, token)))
        if op == "send":
            self._send(client, request, token, early)
        elif op == "poll":
            self._poll(client, request, token, early)
        else:
            self._on_worker(client, token, early, lambda: self.run(op, request, early))

    def _send(self, client: Client, request: dict[str, Any], token: object, early: SocketAnswer) -> None:
        """Compose and publish here; answer from the confirm, or hold the wait for the reply."""
        started = self._begin(
            client,
            "send",
            request,
            token,
            early,
            lambda: sending.start(self.gateway, dict(request), early),
        )
        if started is None:
            return
        prepared, confirmed = started
        if prepared.waiter is not None:
            first_wait_done = prepared.offered

            def finish() -> dict[str, Any]:
                return response_of(
                    guarded("send", lambda: sending.finish(self.gateway, prepared, confirmed, first_wait_done))
                )

            if prepared.offered:
                prepared.watch(confirmed[0])
                wait = min(float(prepared.request.wait or 0), sending.LOOK_EVERY)
                self._hold(client, token, early, prepared.waiter, wait, finish)
            else:
                # after the loop's next poll has written the message: a worker woken now would
                # take the interpreter from the loop thread before it does
                self.owner.next_turn(_safely(lambda: self._on_worker(client, token, early, finish)))
            return
        left = [len(confirmed)]
        starting = [True]  # answered before this returns: the caller's _next goes on

        def answer(response: dict[str, Any]) -> None:
            if client.request is token:
                client.request = None
                self.deadlines.cancel(timer)
                if self._respond(client, response) and not starting[0]:
                    self._next(client)

        def confirmed_one(future: Any) -> None:
            error = future.exception()
            if error is not None:
                answer(response_of(guarded("send", raiser(error))))
            else:
                left[0] -= 1
                if left[0] == 0:
                    answer({"ok": True, **prepared.result})

        def late() -> None:
            answer(error_response(confirm_timed_out()))

        timer = self.deadlines.call_later(prepared.confirm_timeout, late)
        if not confirmed:
            answer({"ok": True, **prepared.result})
        for future in confirmed:
            future.add_done_callback(lambda f: self.owner.now(_safely(lambda: confirmed_one(f))))
        starting[0] = False

    def _begin(
        self,
        client: Client,
        op: str,
        request: dict[str, Any],
        token: object,
        early: SocketAnswer,
        start: Callable[[], Any],
    ) -> Any:
        """``start()``, the loop's first step of ``op``; None when there is nothing more to do
        here: a step would wait (the whole request then runs on a worker), or it was refused
        (answered)."""
        started = guarded(op, start)
        if isinstance(started, WouldWait):
            self._on_worker(client, token, early, lambda: self.run(op, request, early))
            return None
        if isinstance(started, BridgeError):  # refused
            client.request = None
            self._respond(client, error_response(started))
            return None
        return started

    def _poll(self, client: Client, request: dict[str, Any], token: object, early: SocketAnswer) -> None:
        """Look here; hold the first wait here too; wait more on a worker."""
        poll: polling.Polling | None = self._begin(
            client,
            "poll",
            request,
            token,
            early,
            lambda: polling.prepare(self.gateway, dict(request), early, may_wait=False),
        )
        if poll is None:
            return
        looked = guarded("poll", lambda: poll.look(self.gateway))
        waiter = poll.waiter
        if looked is None:
            assert waiter is not None  # look answers a poll without one

            def finish() -> dict[str, Any]:
                return response_of(guarded("poll", lambda: poll.finish(self.gateway, first_wait_done=True)))

            if poll.offer(self.gateway):
                wait = min(poll.deadline - time.monotonic(), sending.LOOK_EVERY)
                self._hold(client, token, early, waiter, wait, finish)
            else:
                self._on_worker(client, token, early, finish)
            return
        if waiter is not None:
            self.gateway.waiters.remove(waiter)
        client.request = None
        self._respond(client, response_of(looked))

    def _hold(
        self,
        client: Client,
        token: object,
        early: SocketAnswer,
        waiter: Waiter,
        timeout: float,
        rest: Callable[[], dict[str, Any]],
    ) -> None:
        """Hold request ``token``'s first wait here (:mod:`.heldwaits`); answered early, its
        answer's ``free`` ends the request; else ``rest`` (its further waits) runs on a worker."""

        def settled(answered: bool) -> None:
            if not answered:
                self._on_worker(client, token, early, rest)
            elif not early.freed:  # the socket took part of the answer: a worker writes the rest
                self._on_worker(client, token, early, lambda: {ANSWERED: True})

        self.held.hold(token, waiter, timeout, settled, lambda: early.freed)

    def _on_worker(
        self, client: Client, token: object, early: SocketAnswer, work: Callable[[], dict[str, Any]]
    ) -> None:
        """Run request ``token`` on a worker, which writes its response."""

        def run() -> None:
            response = work()
            try:
                if not response.get(ANSWERED):
                    self._note(client, response)
                    client.write_all(line_of(response))
                elif early.freed:
                    return  # all of it went out from the thread that handed it over
                else:
                    early.finish()
            except OSError:
                client.mark_broken()
            self._on_loop(lambda: self._request_done(client, token))

        self.workers.submit(run)

    def _on_loop(self, fn: Callable[[], None]) -> None:
        """``owner.later(fn)``, with a failure of ``fn`` logged and a loop that is gone (the
        gateway is stopping, its clients with it) ignored."""
        try:
            self.owner.later(_safely(fn))
        except Exception:  # the loop is gone: the gateway is stopping, its clients with it
            pass

    def _request_done(self, client: Client, token: object) -> None:
        """Request ``token``'s answer is written: serve the client's next request."""
        self.held.end(token)
        if client.request is not token:
            return
        client.request = None
        if not client.serving:
            self._drop(client)
        else:
            self._next(client)

    def _respond(self, client: Client, response: dict[str, Any]) -> bool:
        """Write ``response`` (loop thread); False when the client is gone (then dropped)."""
        self._note(client, response)
        if not client.write(line_of(response)):
            client.hang_up()
            self._drop(client)
            return False
        return True

    def _note(self, client: Client, response: dict[str, Any]) -> None:
        client.note(response)
        if response.get("ok") is False:
            self.events.api_error(str((response.get("error") or {}).get("code") or "FAILURE"))

    def _hang_up(self, client: Client) -> None:
        client.hang_up()
        if not client.busy:
            self._drop(client)

    def _drop(self, client: Client) -> None:
        """Forget a connection that ended; what it was handed and never confirmed is held again."""
        if client in self._clients:
            self._clients.discard(client)
            client.close()
        pending = client.take_pending()
        if pending:
            self.workers.submit(lambda: self.gateway.waiters.release_taken(sorted(pending)))

    # --- requests (any thread) ----------------------------------------------------------

    def run(self, op: str, request: dict[str, Any], early: Any = None) -> dict[str, Any]:
        """One parsed request → one response dict; never raises. ``early`` goes to the
        operations that may answer from another thread (their response then only says so)."""
        handler = operations.OPS[op]
        if op in operations.ANSWERING:
            request = {**request, "early": early}  # never the client's: a field of that name is replaced
        started = time.monotonic()
        response = response_of(guarded(op, lambda: handler(self.gateway, **request)))
        if logger.isEnabledFor(logging.DEBUG):  # the op's own events are logged at INFO already
            glog.event(logger, "api", logging.DEBUG, op=op, ms=round((time.monotonic() - started) * 1000, 1))
        return response


def _safely(fn: Callable[[], None]) -> Callable[[], None]:
    """``fn`` for the loop, which a failure must not stop: logged instead."""

    def call() -> None:
        try:
            fn()
        except Exception as exc:
            glog.event(logger, "local API step failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")

    return call


__all__ = ["PENDING", "LocalApi"]
