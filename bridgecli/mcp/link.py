"""The MCP server's link to the local gateway: its socket API, called off the event loop.

Every call opens its own short-lived connection (well under a millisecond), so a long-poll
never blocks another tool call queued behind it, and a restarted gateway is found again by
the next call: a dead gateway is a :class:`~bridgecli.errors.GatewayUnavailable` for that
call, never a dead server — at start too, where the entity is attached in the background.
Blocking calls run on *daemon* threads rather than anyio's pool, so the process can exit at
once when the client leaves during a 10-minute ``--wait``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bridgecli import sending_client
from bridgecli.errors import BridgeError, Conflict, GatewayUnavailable
from bridgecli.gateway.client import GatewayClient, GatewaySession
from bridgecli.requests import SendRequest
from bridgecli.results import SendResult

T = TypeVar("T")
logger = logging.getLogger("bridgecli.mcp")

#: the hold backend's delivery spec: messages wait on this host until the client pulls them
HOLD = "hold"


async def run_blocking(fn: Callable[[], T]) -> T:
    """Run ``fn`` on a daemon thread and await its result (cancellation abandons it)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():
            setter(value)

    def worker() -> None:
        try:
            result = fn()
        except BaseException as exc:  # handed to the awaiting task, not swallowed
            outcome: tuple[Callable[[Any], None], Any] = (future.set_exception, exc)
        else:
            outcome = (future.set_result, result)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    threading.Thread(target=worker, name="bridge-mcp-call", daemon=True).start()
    return await future


#: retries of the background attach back off up to this many seconds (bounded, so a gateway
#: started later is found within a few seconds)
ATTACH_BACKOFF_MAX = 3.0
#: the fix named by every "gateway is down" tool error
START_IT = "start it: bridge gateway"
#: a send's wait for its reply ends this many seconds after its own wait (MCP clients time
#: calls out too, so a tool call must end even if the gateway never answers)
REPLY_SLACK = 30.0


@dataclass
class GatewayLink:
    """Calls to the local gateway on behalf of one MCP session (entity ``gid``).

    ``label`` is known from the start (:mod:`bridgecli.mcp.identity`); ``gid`` once
    :meth:`ensure` has registered or re-attached the entity, which needs the gateway."""

    gid: str = ""
    label: str = ""
    role: str = "main"
    #: tool calls of this session blocked right now for a reply (send/ask with wait)
    waiting: int = 0
    #: why the last attach failed (None: attached, or not tried yet)
    problem: BridgeError | None = None
    _attaching: asyncio.Lock | None = field(default=None, repr=False)

    @contextlib.asynccontextmanager
    async def awaiting_reply(self) -> AsyncIterator[None]:
        """Mark a call that blocks for a reply: that reply is held for a moment before the
        blocked call takes it, and the inbox watcher should not announce it as news."""
        self.waiting += 1
        try:
            yield
        finally:
            self.waiting -= 1

    @contextlib.contextmanager
    def session(self) -> Iterator[GatewaySession]:
        """A host session on a fresh connection; a missing or lost gateway is one line that
        names the fix. Its sends wait :data:`REPLY_SLACK` past their own wait at most."""
        try:
            with GatewaySession(GatewayClient.require(), wait_slack=REPLY_SLACK) as session:
                yield session
        except GatewayUnavailable as exc:
            raise GatewayUnavailable(f"bridge is not connected: {exc.message}", START_IT) from None

    def call_sync(self, op: str, timeout: float | None = 30.0, **params: Any) -> dict[str, Any]:
        """One request on a fresh connection; raises the gateway's typed error."""
        with self.session() as session:
            return session.client.call(op, timeout=timeout, **params)

    async def call(self, op: str, timeout: float | None = 30.0, **params: Any) -> dict[str, Any]:
        """:meth:`call_sync` without blocking the event loop."""
        return await run_blocking(lambda: self.call_sync(op, timeout=timeout, **params))

    async def send(self, request: SendRequest) -> SendResult:
        """``request`` sent as every client sends (:func:`bridgecli.sending_client.send`), off
        the event loop."""

        def sent() -> SendResult:
            with self.session() as session:
                return sending_client.send(session, request)

        return await run_blocking(sent)

    async def ensure(self) -> str:
        """This session's gid, registering or re-attaching its entity first if need be.

        Raises the one-line reason it cannot (no gateway: ``… — start it: bridge gateway``)."""
        if self.gid:
            return self.gid
        if self._attaching is None:
            self._attaching = asyncio.Lock()
        async with self._attaching:  # one attach at a time: the background loop and tool calls
            if not self.gid:
                try:
                    await run_blocking(self.attach_sync)
                except BridgeError as exc:
                    self.problem = exc
                    raise
                self.problem = None
                logger.info("attached as %s (gid %s)", self.label, self.gid)
        return self.gid

    async def attach_forever(self) -> None:
        """Retry :meth:`ensure` with bounded backoff until it succeeds; one stderr line when
        the first try fails, not one per retry."""
        pause = 0.25
        while True:
            try:
                await self.ensure()
                return
            except BridgeError as exc:
                if pause == 0.25:
                    logger.warning(
                        "not attached yet (%s); retrying in the background "
                        "(for the browser tools alone: bridge mcp --no-messaging)",
                        exc,
                    )
            await asyncio.sleep(pause)
            pause = min(ATTACH_BACKOFF_MAX, pause * 2)

    def attach_sync(self) -> dict[str, Any]:
        """Register this session's entity, or re-attach to the one with ``self.label``.

        Re-attaching (rather than registering afresh each start) is what makes a stranded
        reply (U3) reachable: it was addressed to the gid of the *previous* session, and is
        held under that gid until someone with it polls. An entity with that label but a
        different backend is someone else's (a pane, a script) — taking it over would steal
        its messages, so that is refused.
        """
        label, role = self.label, self.role
        entities = self.call_sync("entities", timeout=10)["entities"]
        existing = [e for e in entities if e.get("label") == label]
        if existing:
            entity = existing[0]
            if str(entity.get("deliver") or "").partition(":")[0] != HOLD:
                raise Conflict(
                    f"label {label!r} is already registered on this host with --deliver "
                    f"{entity.get('deliver')}, not hold",
                    "restart bridge mcp with another --label, or `bridge unregister` that entity",
                )
            if entity.get("role") != role:
                logger.warning(
                    "re-attached to %s (gid %s), which is registered with role %s, not %s",
                    label,
                    entity.get("gid"),
                    entity.get("role"),
                    role,
                )
        else:
            entity = self.call_sync("register", timeout=30, label=label, role=role, deliver=HOLD)["entity"]
        self.gid, self.label = entity["gid"], entity["label"]
        return entity


__all__ = ["GatewayLink", "run_blocking", "HOLD", "START_IT"]
