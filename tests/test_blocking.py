"""The approval-dialog wait shared by the terminal backends (pure logic, fast)."""

from __future__ import annotations

import time

import pytest

from bridgecli.blocking import wait_unblocked
from bridgecli.errors import DeliveryError


def test_returns_the_first_unblocked_state_after_backing_off() -> None:
    states = iter(["blocked", "blocked", "idle", "never read"])
    seen: list[float] = []

    def probe() -> str:
        seen.append(time.monotonic())
        return next(states)

    assert wait_unblocked(probe, lambda s: s == "blocked", timeout=5, first_delay=0.02,
                          failure=lambda: DeliveryError("x")) == "idle"
    assert len(seen) == 3 and seen[2] - seen[1] >= seen[1] - seen[0]  # the delay grows


def test_gives_up_with_the_callers_retryable_failure() -> None:
    started = time.monotonic()
    with pytest.raises(DeliveryError, match="still blocked") as info:
        wait_unblocked(lambda: "blocked", lambda s: True, timeout=0.2, first_delay=0.05,
                       failure=lambda: DeliveryError("still blocked", retryable=True))
    assert info.value.retryable and 0.2 <= time.monotonic() - started < 2
