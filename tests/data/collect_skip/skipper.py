"""A module that skips itself whole at collection (its extra is not installed); run only by
tests/test_ci_guard.py, never collected on its own (no test_ prefix)."""

import pytest

pytest.importorskip("bridgecli_no_such_extra")


def test_never_runs() -> None:
    raise AssertionError("unreachable")
