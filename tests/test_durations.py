from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridgecli.durations import parse


@pytest.mark.parametrize(
    "text,seconds", [("30s", 30), ("10m", 600), ("1h30m", 5400), ("500ms", 0.5), ("2", 2), ("1.5", 1.5), ("1d", 86400)]
)
def test_forms(text, seconds):
    assert parse(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "m", "10x", "5 m", "-3", "1h-2m", "s10", "nan", "inf", "1e400"])
def test_bad(bad):
    with pytest.raises(ValueError):
        parse(bad)


@given(st.text(max_size=20))
def test_never_crashes(text):
    try:
        assert parse(text) >= 0
    except ValueError:
        pass
