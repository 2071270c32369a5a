"""The first wait of a local request (``send --wait``, ``poll --wait``), held on the local
API's loop with no thread blocked.

While held, the thread that hands the request's waiter its messages answers the client itself
(:meth:`.waiters.Waiters.offer`). Only when that does not happen (the wake-up brought no answer,
or the time is up) does a worker thread take the request on. Why: a worker woken for every
waiting request cost each round trip two thread wake-ups per gateway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from bridgecli.amqp.deadlines import Deadlines
from bridgecli.gateway import log as glog
from bridgecli.gateway.waiters import Waiter

logger = logging.getLogger("bridgecli.gateway")


class WaiterHost(Protocol):
    """What holding a wait needs of the gateway's waiters (:class:`.waiters.Waiters`)."""

    def withdraw(self, waiter: Waiter) -> bool:
        """Withdraw ``waiter``'s offered answer; True when it went out."""

    def remove(self, waiter: Waiter) -> None:
        """Unregister ``waiter``; what was handed to it and not picked up is held again."""


class _Held:
    __slots__ = ("waiter", "settled", "timer")

    def __init__(self, waiter: Waiter, settled: Callable[[bool], None]) -> None:
        self.waiter = waiter
        self.settled = settled
        self.timer: Any = None


class HeldWaits:
    """The held first waits of one local API, by request token. Every method runs on the loop
    thread; ``later(fn)`` runs ``fn`` there from any thread."""

    def __init__(self, host: WaiterHost, deadlines: Deadlines, later: Callable[[Callable[[], None]], None]) -> None:
        self._host = host
        self._deadlines = deadlines
        self._later = later
        self._held: dict[object, _Held] = {}

    def hold(
        self,
        token: object,
        waiter: Waiter,
        timeout: float,
        settled: Callable[[bool], None],
        ended: Callable[[], bool],
    ) -> None:
        """Hold request ``token``'s wait for ``waiter``'s offered answer. When it is woken, or
        ``timeout`` s on, the offer is withdrawn and ``settled(answered)`` runs, unless
        :meth:`end` came first or is on its way (``ended()``: the answer went out whole, and its
        own callback ends the request). With ``answered`` the waiter is removed here; without
        it, the waiter is the caller's, to wait on."""
        held = _Held(waiter, settled)
        self._held[token] = held

        def settle() -> None:
            if self._held.get(token) is not held:
                return  # ended already: the answer went out whole
            self._forget(token)
            try:
                answered = self._host.withdraw(waiter)
                if answered:
                    self._host.remove(waiter)
                held.settled(answered)
            except Exception as exc:  # on the loop: a failure here must not stop it
                glog.event(logger, "held wait failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")

        def woken() -> None:  # any thread
            if not ended():  # else one hand-off to the loop is enough
                self._later(settle)

        waiter.call_on_wake(woken)
        held.timer = self._deadlines.call_later(timeout, settle)
        if waiter.event.is_set():  # woken before ``on_wake`` was set
            self._later(settle)

    def end(self, token: object) -> None:
        """Request ``token``'s answer went out whole: let its wait go, if held."""
        held = self._forget(token)
        if held is not None:
            self._host.withdraw(held.waiter)
            self._host.remove(held.waiter)

    def _forget(self, token: object) -> _Held | None:
        held = self._held.pop(token, None)
        if held is not None:
            held.waiter.call_on_wake(None)
            self._deadlines.cancel(held.timer)
        return held
