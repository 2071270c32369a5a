"""Waiting out an agent's approval dialog before typing into its terminal.

Shared by terminal delivery backends (tmux, herdr): a message typed while a dialog such as
"Do you want to proceed? ❯ 1. Yes" is open would answer it. A backend probes the terminal,
and while the probe says *blocked* it waits with capped exponential backoff; when the wait
runs out it fails *retryably*, so the gateway retries later and finally dead-letters —
nothing is ever typed into the dialog.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from bridgecli.errors import DeliveryError

T = TypeVar("T")


def wait_unblocked(
    probe: Callable[[], T],
    blocked: Callable[[T], bool],
    *,
    timeout: float,
    failure: Callable[[], DeliveryError],
    first_delay: float = 0.1,
    max_delay: float = 2.0,
) -> T:
    """Call ``probe`` until ``blocked(result)`` is false and return that result.

    Polls with doubling delays (``first_delay`` … ``max_delay``) for at most ``timeout``
    seconds, then raises ``failure()`` (which should be a retryable
    :class:`~bridgecli.errors.DeliveryError` saying nothing was typed)."""
    deadline = time.monotonic() + timeout
    delay = first_delay
    while True:
        state = probe()
        if not blocked(state):
            return state
        if time.monotonic() >= deadline:
            raise failure()
        time.sleep(min(delay, max(deadline - time.monotonic(), 0.01)))
        delay = min(delay * 2, max_delay)
