"""The approval-dialog wait shared by the terminal backends (pure logic, fast)."""

from __future__ import annotations

import time

import pytest

from bridgecli.blocking import wait_unblocked
from bridgecli.errors import DeliveryError


def test_returns_the_first_unblocked_state_after_backing_off(monkeypatch) -> None:
    import types

    from bridgecli import blocking

    states = iter(["blocked", "blocked", "idle", "never read"])
    slept: list[float] = []
    # the delays it asks for, not wall-clock gaps (those vary with the machine's load)
    monkeypatch.setattr(blocking, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=slept.append))
    assert (
        wait_unblocked(
            lambda: next(states),
            lambda s: s == "blocked",
            timeout=5,
            first_delay=0.02,
            failure=lambda: DeliveryError("x"),
        )
        == "idle"
    )
    assert slept == [0.02, 0.04]  # the delay doubles


def test_gives_up_with_the_callers_retryable_failure() -> None:
    started = time.monotonic()
    with pytest.raises(DeliveryError, match="still blocked") as info:
        wait_unblocked(
            lambda: "blocked",
            lambda s: True,
            timeout=0.2,
            first_delay=0.05,
            failure=lambda: DeliveryError("still blocked", retryable=True),
        )
    assert info.value.retryable and time.monotonic() - started >= 0.2  # it waited the timeout out
