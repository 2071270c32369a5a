"""The MCP server's link to the local gateway: its socket API, called off the event loop.

Every call opens its own short-lived connection (well under a millisecond), so a long-poll
never blocks another tool call queued behind it, and a restarted gateway is found again by
the next call: a dead gateway is a :class:`~bridgecli.errors.GatewayUnavailable` for that
call, never a dead server. Blocking calls run on *daemon* threads rather than anyio's pool,
so the process can exit at once when the client leaves during a 10-minute ``--wait``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from bridgecli.errors import Conflict
from bridgecli.gateway.client import GatewayClient

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


@dataclass
class GatewayLink:
    """Calls to the local gateway on behalf of one MCP session (entity ``gid``)."""

    gid: str = ""
    label: str = ""
    #: tool calls of this session blocked right now for a reply (send/ask with wait)
    waiting: int = 0

    @contextlib.asynccontextmanager
    async def awaiting_reply(self) -> AsyncIterator[None]:
        """Mark a call that blocks for a reply: that reply is held for a moment before the
        blocked call takes it, and the inbox watcher should not announce it as news."""
        self.waiting += 1
        try:
            yield
        finally:
            self.waiting -= 1

    def call_sync(self, op: str, timeout: float | None = 30.0, **params: Any) -> dict[str, Any]:
        """One request on a fresh connection; raises the gateway's typed error."""
        with GatewayClient.require() as client:
            return client.call(op, timeout=timeout, **params)

    async def call(self, op: str, timeout: float | None = 30.0, **params: Any) -> dict[str, Any]:
        """:meth:`call_sync` without blocking the event loop."""
        return await run_blocking(lambda: self.call_sync(op, timeout=timeout, **params))

    def attach(self, label: str, role: str) -> dict[str, Any]:
        """Register this session's entity, or re-attach to the one with ``label``.

        Re-attaching (rather than registering afresh each start) is what makes a stranded
        reply (U3) reachable: it was addressed to the gid of the *previous* session, and is
        held under that gid until someone with it polls. An entity with that label but a
        different backend is someone else's (a pane, a script) — taking it over would steal
        its messages, so that is refused.
        """
        entities = self.call_sync("entities", timeout=10)["entities"]
        existing = [e for e in entities if e.get("label") == label]
        if existing:
            entity = existing[0]
            if entity.get("deliver") != HOLD:
                raise Conflict(
                    f"label {label!r} is already registered on this host with --deliver "
                    f"{entity.get('deliver')}, not hold",
                    "pick another --label for bridge mcp, or `bridge unregister` that entity",
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


class SessionLock:
    """One ``bridge mcp`` per entity: a second session on the same label would drain the
    same hold, and each would see only some of the messages. The lock is an exclusive
    ``flock`` on a file in the runtime dir, held for the process's lifetime, so a crashed
    session never leaves it stale."""

    def __init__(self, gid: str) -> None:
        self.gid = gid
        self._file: Any = None

    def acquire(self, label: str) -> None:
        import fcntl
        import os

        from bridgecli import paths

        directory = paths.runtime_dir()
        paths.ensure_private_dir(directory)
        handle = open(directory / f"mcp-{self.gid}.lock", "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise Conflict(
                f"label {label!r} is already served by another bridge mcp (pid {holder})",
                "give this session its own --label (e.g. --label main2)",
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._file = handle


__all__ = ["GatewayLink", "SessionLock", "run_blocking", "HOLD"]
