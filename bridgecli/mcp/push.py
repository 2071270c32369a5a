"""Telling the MCP client that messages are waiting — without giving up the pull.

The final hop is a pull (docs/design.md#invariant-3), so only the *fact* that messages wait,
and how many, is pushed: as ``notifications/message``, as ``notifications/resources/updated``
for ``bridge://inbox``, and as Claude Code's ``notifications/claude/channel``. Arrivals are
seen through op ``held`` with ``wait`` and ``baseline``, which answers once the held count
changes. The nudge reminds a client that leaves messages unpolled, at doubling intervals up
to 64 × ``messaging.nudge_after``, timed by the broker (docs/design.md#nudge); how and at what
price: docs/decisions/mcp-nudge-through-bridge-delay.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bridgecli.errors import BridgeError, NotFound
from bridgecli.mcp.link import GatewayLink
from bridgecli.requests import SendRequest, ShowRequest
from bridgecli.results import ShowResult

logger = logging.getLogger("bridgecli.mcp")

#: the ``turn`` field that marks the server's self-addressed nudge messages
NUDGE_TURN = "bridge-mcp-nudge"
NUDGE_TEXT = "bridge mcp: reminder timer (internal; filtered out of bridge_poll)"
#: how long one ``held`` long-poll lasts before it is re-issued (seconds)
LONG_POLL = 25.0
#: reminders back off: the k-th waits nudge_after * 2**min(k, MAX_DOUBLINGS)
MAX_DOUBLINGS = 6
#: how long an arrival is re-checked later while a reply is awaited (seconds)
DEFER = 0.3
#: the longest pause after a failed gateway call (seconds); shorter ones come first
MAX_BACKOFF = 10.0


def is_nudge(message: dict[str, Any], gid: str) -> bool:
    """True for the server's own nudge messages (never shown to the model)."""
    return message.get("from") == gid and message.get("turn") == NUDGE_TURN


@dataclass(frozen=True)
class InboxEvent:
    """Something the client should hear about: ``arrived`` or ``reminder``."""

    kind: str
    held: int
    new: int = 0
    waited: float | None = None

    def text(self, label: str) -> str:
        """One line for the model: what happened, and which tool to call."""
        plural = "message is" if self.held == 1 else "messages are"
        if self.kind == "reminder":
            waited = f" for {self.waited:.0f}s" if self.waited is not None else ""
            return (
                f"Reminder: {self.held} bridge {plural} still held for {label}{waited}. Call bridge_poll to read them."
            )
        return f"{self.held} bridge {plural} held for {label} ({self.new} new). Call bridge_poll to read them."


Notifier = Callable[[InboxEvent], Awaitable[None]]


@dataclass
class InboxWatcher:
    """Watches the session's hold inbox and announces arrivals and reminders."""

    link: GatewayLink
    notify: Notifier
    nudge_after: float
    real: int = 0  #: held messages that are not our nudges, as last seen
    since: float | None = None  #: when ``real`` last rose from zero (monotonic)
    nudges: dict[str, str] = field(default_factory=dict)  #: nudge msgId -> "pending" | "landed"
    _failures: int = 0
    _deferred: int | None = None
    _reminders: int = 0  #: reminders sent since the hold was last empty

    async def run(self) -> None:
        """Watch until cancelled. A missing gateway pauses the watch, never ends it: a
        background task that raised would take the whole MCP server (and every tool) down."""
        while True:
            try:
                await self.step()
                self._failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 — the watch must outlive any one failure
                self._failures += 1
                pause = min(MAX_BACKOFF, 0.5 * 2 ** min(self._failures, 5))
                if isinstance(exc, BridgeError):
                    logger.warning("inbox watch paused %.1fs: %s", pause, exc)
                else:  # a bug: keep the traceback (stderr only), keep the server up
                    logger.exception("inbox watch failed; retrying in %.1fs", pause)
                await asyncio.sleep(pause)

    async def step(self) -> None:
        """One observation: read the held count, account for nudges, announce changes."""
        landed = await self._landed()
        # block in the gateway until the held count differs from what we last saw (arrivals
        # wake it at once; a drain is noticed within a second)
        baseline = self.real + len(landed)
        answer = await self.link.call(
            "held", gid=self.link.gid, wait=LONG_POLL, baseline=baseline, timeout=LONG_POLL + 15
        )
        if await self._landed() != landed:
            return  # a nudge landed during the read: the count is ambiguous, read again
        real = max(0, int(answer.get("held") or 0) - len(landed))
        now = time.monotonic()
        fired = [msg_id for msg_id in landed if self.nudges.get(msg_id) == "pending"]
        for msg_id in fired:
            self.nudges[msg_id] = "landed"
        if real > self.real and self.link.waiting and self._deferred != real:
            # a send/ask of this session is blocked for a reply: the rise may be that reply,
            # held for the moment it takes the blocked call to collect it. Look again shortly
            # (once per rise, so a long wait never hides unrelated arrivals).
            self._deferred = real
            await asyncio.sleep(DEFER)
            return
        self._deferred = None
        if real > self.real:
            if self.real == 0:
                self.since = now
            await self.notify(InboxEvent("arrived", held=real, new=real - self.real))
            if "pending" not in self.nudges.values():
                await self._schedule_nudge()
        elif fired and real > 0:
            waited = now - self.since if self.since is not None else None
            await self.notify(InboxEvent("reminder", held=real, waited=waited))
            self._reminders += 1
            await self._schedule_nudge()
        if real == 0:
            self.since = None
            self._reminders = 0
        self.real = real

    async def _landed(self) -> set[str]:
        """Our nudges that are held in the inbox now; forgets the ones already drained."""
        landed: set[str] = set()
        for msg_id in list(self.nudges):
            try:
                request = ShowRequest(msg_id=msg_id)
                answer = await self.link.call(request.OP, timeout=10, **request.to_wire())
                message = ShowResult.from_wire(answer).message
            except NotFound:
                continue  # still travelling through bridge.delay
            if message.state == "held":
                landed.add(msg_id)
            else:
                del self.nudges[msg_id]  # drained by a poll
        return landed

    def nudge_delay(self) -> float:
        """Seconds until the next reminder: ``nudge_after``, doubling with each one sent."""
        return self.nudge_after * 2 ** min(self._reminders, MAX_DOUBLINGS)

    async def _schedule_nudge(self) -> None:
        """Send ourselves the delayed reminder message through ``bridge.delay``."""
        try:
            request = SendRequest(
                command="send",
                sender=self.link.gid,
                target=self.link.gid,
                contents=[NUDGE_TEXT],
                delay=self.nudge_delay(),
                turn=NUDGE_TURN,
                force=True,
            )
            sent = await self.link.send(request)
        except BridgeError as exc:
            logger.warning("could not schedule the reminder through bridge.delay: %s", exc)
            return
        self.nudges[str(sent.msg_id)] = "pending"
