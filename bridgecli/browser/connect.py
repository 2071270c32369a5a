"""Election and the uniform ``send()``: host or guest, with failover (docs/design.md#browser-election).

:class:`BrowserBridge` tries to bind 127.0.0.1:PORT. The winner **hosts**
:class:`~.broker.Broker` behind :class:`~.server.BrokerServer` and calls it through
:class:`LocalAgent` (no socket, no JSON); a loser (EADDRINUSE) is a **guest** through
:class:`~.agent_client.AgentClient`. The bind is atomic, so exactly one process hosts.

When a guest's socket drops it is ``re-electing``: a background thread retries the bind, then
a guest connection, with jittered backoff, while :meth:`BrowserBridge.send` fails at once with
``bridge re-electing`` (docs/design.md#browser-fail-fast).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from typing import Any

from bridgecli.browser import frames as F
from bridgecli.browser import token_file
from bridgecli.browser.agent_client import (
    AgentClient,
    NotConnected,
    Waiter,
    await_result,
    connect_with_backoff,
    result_data,
)
from bridgecli.browser.broker import Broker
from bridgecli.browser.server import BrokerServer, bind_loopback, is_addr_in_use
from bridgecli.errors import BridgeError, BrowserError

HOST, GUEST, RE_ELECTING, CLOSED = "host", "guest", "re-electing", "closed"
RE_ELECTING_MESSAGE = "bridge re-electing: the broker host went away and a new one is being elected"


class LocalAgent:
    """The host's own agent: a broker ``Conn`` whose frames never leave the process."""

    def __init__(
        self, broker: Broker, label: str | None, on_event: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        self._broker = broker
        self._on_event = on_event
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiters: dict[Any, Waiter] = {}
        self.client_id = broker.attach(self, {"role": F.ROLE_AGENT, "label": label})

    # Conn side: called by the broker.
    def send(self, frame: dict[str, Any]) -> None:
        if frame.get("type") in ("result", "error"):
            with self._lock:
                waiter = self._waiters.get(frame.get("id"))
            if waiter is not None:
                waiter.resolve(frame if frame["type"] == "result" else dict(frame, ok=False))
        elif frame.get("type") == "event" and self._on_event is not None:
            self._on_event(frame)

    def close(self, code: int, reason: str) -> None:
        self._broker.detach(self.client_id)

    # Caller side.
    def request(
        self,
        action: str,
        group: str | None = None,
        params: dict[str, Any] | None = None,
        *,
        target: str | None = None,
        timeout: float = 60.0,
        abort: threading.Event | None = None,
    ) -> Any:
        """Same contract as :meth:`AgentClient.request`."""
        req_id = next(self._ids)
        waiter = Waiter()
        with self._lock:
            self._waiters[req_id] = waiter
        try:
            self._broker.handle(self.client_id, F.command(req_id, action, group, params, target))
            frame = await_result(waiter, timeout, abort, action)
        finally:
            with self._lock:
                self._waiters.pop(req_id, None)
        return result_data(frame)


class BrowserBridge:
    """Host-or-guest connection to the browser broker with one ``send()`` for both modes.

    ``allow_host=False`` makes a pure guest (one-shot CLI commands: they must not become a
    broker that dies with them). ``failover=False`` turns a lost host into ``not_connected``
    instead of a re-election.
    """

    def __init__(
        self,
        port: int,
        token: str | None = None,
        *,
        label: str | None = None,
        allow_host: bool = True,
        failover: bool = True,
        connect_timeout: float = 3.0,
        reelect_give_up: float | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        log: Callable[[str], None] | None = None,
        server_options: dict[str, Any] | None = None,
    ) -> None:
        self.port = port
        self.url = f"ws://127.0.0.1:{port}/"
        self._explicit_token = token
        self.label = label
        self.allow_host = allow_host
        self.failover = failover
        self._connect_timeout = connect_timeout
        self._give_up = reelect_give_up
        self._on_event = on_event
        self._log = log or (lambda text: None)
        self._server_options = server_options or {}
        self._lock = threading.RLock()
        self.mode = CLOSED
        self.broker: Broker | None = None
        self.server: BrokerServer | None = None
        self._local: LocalAgent | None = None
        self._client: AgentClient | None = None
        self._closing = threading.Event()
        self._hosting = threading.Lock()
        self.mode_changed = threading.Condition(self._lock)
        self.elections = 0

    # --- election ------------------------------------------------------------------------------

    def start(self) -> BrowserBridge:
        """Elect once: host if the bind succeeds (and hosting is allowed), else guest.

        Raises :class:`NotConnected` when guesting fails (no broker / not a bridge) and
        :class:`~bridgecli.errors.PermissionProblem` for a refused token.
        """
        if self._try_host() is not None:
            return self
        if not self.allow_host:
            try:
                client = self._open_guest()
            except NotConnected:
                self._explain_absent_host()
                raise
            self._become_guest(client)
            return self
        # An adapter that may host retries like a re-election: the winner of a simultaneous
        # start may not have written bridge.json yet, or may exit while we connect.
        outcome = connect_with_backoff(self.url, "", give_up_after=self._give_up or 10.0, before_attempt=self._attempt)
        if isinstance(outcome, AgentClient):
            self._become_guest(outcome)
        return self

    def _try_host(self) -> str | None:
        # close() waits for a hosting attempt under way: it has written this pid into
        # bridge.json, and a close that ran meanwhile would leave the pid there
        with self._hosting:
            if not self.allow_host or self._closing.is_set():
                return None
            return self._host()

    def _host(self) -> str | None:
        try:
            sock = bind_loopback(self.port)
        except OSError as exc:
            if is_addr_in_use(exc):
                return None
            raise BrowserError(
                f"cannot bind 127.0.0.1:{self.port} ({exc.strerror})", "choose another port with browser.port"
            ) from None
        try:
            token, generated = token_file.resolve_token(self._explicit_token, self.port, write_file=True)
            broker = Broker(log=self._log)
            server = BrokerServer(broker, token, sock, log=self._log, **self._server_options).start()
        except BaseException:
            sock.close()
            raise
        with self._lock:
            self.broker, self.server = broker, server
            self._local = LocalAgent(broker, self.label, self._on_event)
            self._set_mode(HOST)
        self._log(f"hosting the browser broker on {self.url} (token file {token_file.path()})")
        if generated:
            self._log(
                f"generated a new bridge token: {token} — paste it into the browser "
                "extension once; `bridge token show` prints it again"
            )
        return HOST

    def _explain_absent_host(self) -> None:
        """A pure guest found no broker. If ``bridge.json`` names a host process that has died,
        adapters are probably re-electing right now: say so (docs/design.md#browser-fail-fast) rather
        than suggesting to start a broker that is about to exist."""
        try:
            data = token_file.read()
        except BridgeError:
            return
        if not data:
            return
        pid = data.get("pid")
        if not isinstance(pid, int) or pid <= 0 or data.get("port") != self.port:
            return
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise F.CommandError(
                F.E_RE_ELECTING,
                f"{RE_ELECTING_MESSAGE} (host pid {pid} exited; if no `bridge browser serve` runs, start one)",
            ) from None
        except OSError:
            return

    def _open_guest(self) -> AgentClient:
        token = token_file.guest_token(self._explicit_token)
        if token is None:
            raise NotConnected(
                f"no token: {token_file.path()} does not exist yet", "start the broker with `bridge browser serve`"
            )
        return AgentClient.open(
            self.url,
            token,
            label=self.label,
            timeout=self._connect_timeout,
            on_event=self._on_event,
            on_close=self._on_lost,
        )

    def _become_guest(self, client: AgentClient) -> None:
        with self._lock:
            if self._closing.is_set():
                client.close()
                return
            self._client = client
            self._set_mode(GUEST)
        if not client.connected:  # dropped between open() and now: on_close already ran early
            self._on_lost(client)
        self._log(f"connected to the browser broker on {self.url} as a guest")

    def _set_mode(self, mode: str) -> None:
        self.mode = mode
        if mode in (HOST, GUEST):
            self.elections += 1
        self.mode_changed.notify_all()

    def _on_lost(self, client: AgentClient) -> None:
        with self._lock:
            if client is not self._client or self._closing.is_set():
                return
            self._client = None
            if not self.failover:
                self._set_mode(CLOSED)
                return
            self._set_mode(RE_ELECTING)
        self._log("lost the browser broker host; re-electing")
        threading.Thread(target=self._reelect, name="bridge-reelect", daemon=True).start()

    def _reelect(self) -> None:
        while not self._closing.is_set():
            try:
                outcome = connect_with_backoff(
                    self.url, "", give_up_after=self._give_up or 30.0, before_attempt=self._attempt
                )
            except BridgeError as exc:
                retryable = isinstance(exc, (NotConnected, BrowserError))
                if self._give_up is not None or not retryable:
                    self._log(f"re-election gave up: {exc}")
                    with self._lock:
                        self._set_mode(CLOSED)
                    return
                self._closing.wait(1.0)  # e.g. a bind error other than EADDRINUSE: no busy loop
                continue
            except Exception as exc:  # noqa: BLE001 - a bug must not strand us in re-electing
                self._log(f"re-election attempt failed unexpectedly ({type(exc).__name__}: {exc}); retrying")
                self._closing.wait(0.5)
                continue
            if isinstance(outcome, AgentClient):
                self._become_guest(outcome)
            return

    def _attempt(self) -> Any:
        """One re-election step: win the bind, else join whoever won."""
        if self._closing.is_set():
            return HOST  # any non-None value ends the loop
        if self._try_host() is not None:
            return HOST
        return self._open_guest()

    def wait_mode(self, *modes: str, timeout: float = 10.0) -> str:
        """Block until the bridge is in one of ``modes`` (tests, ``serve``); returns it."""
        with self._lock:
            self.mode_changed.wait_for(lambda: self.mode in modes, timeout)
            return self.mode

    # --- the uniform send ----------------------------------------------------------------------

    def send(
        self,
        action: str,
        group: str | None = None,
        params: dict[str, Any] | None = None,
        *,
        target: str | None = None,
        timeout: float = 60.0,
        abort: threading.Event | None = None,
    ) -> Any:
        """Run one command through the broker, whichever mode this process is in.

        Raises :class:`~.frames.CommandError`; its ``code`` is ``re_electing`` while a new host
        is being elected (retry), ``not_connected`` when there is no broker.
        """
        with self._lock:
            mode, local, client = self.mode, self._local, self._client
        if mode == HOST and local is not None:
            return local.request(action, group, params, target=target, timeout=timeout, abort=abort)
        if mode == GUEST and client is not None:
            try:
                return client.request(action, group, params, target=target, timeout=timeout, abort=abort)
            except F.CommandError as exc:
                if exc.code == F.E_NOT_CONNECTED and self.failover:
                    raise F.CommandError(F.E_RE_ELECTING, RE_ELECTING_MESSAGE) from None
                raise
        if mode == RE_ELECTING:
            raise F.CommandError(F.E_RE_ELECTING, RE_ELECTING_MESSAGE)
        raise F.CommandError(F.E_NOT_CONNECTED, f"not connected to a browser broker on {self.url}")

    def close(self) -> None:
        """Leave: a host shuts its server down (guests then re-elect); a guest disconnects."""
        self._closing.set()
        with self._hosting, self._lock:
            server, client = self.server, self._client
            self.server, self._client, self._local = None, None, None
            self._set_mode(CLOSED)
        if server is not None:
            self._forget_pid()  # before guests notice, so a new host's pid is never clobbered
            server.shutdown()
        if client is not None:
            client.close()

    def _forget_pid(self) -> None:
        """A host leaving cleanly drops its pid from ``bridge.json`` (keeping the token), so a
        later one-shot command says "start a broker", not "re-electing"."""
        try:
            data = token_file.read()
            if data and data.get("pid") == os.getpid() and data.get("port") == self.port:
                token_file.write(self.port, data["token"])
        except (BridgeError, OSError):
            pass

    def __enter__(self) -> BrowserBridge:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()
