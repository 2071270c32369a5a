"""bench/chaos_checker.py: each class of a send, and the pass bar (pure, no lab)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

CHECKER = Path(__file__).resolve().parents[1] / "bench" / "chaos_checker.py"


@pytest.fixture(scope="module")
def cc():
    spec = importlib.util.spec_from_file_location("bench_chaos_checker", CHECKER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def sends(cc, *specs):
    """(msg_id, confirmed) in send order, all from s to r."""
    return [cc.Send("s", "r", msg_id, seq, confirmed) for seq, (msg_id, confirmed) in enumerate(specs)]


def got(cc, *ids, recipient="r"):
    return [cc.Delivery(recipient, msg_id, seq) for seq, msg_id in enumerate(ids)]


def test_in_order_once_is_ok(cc):
    verdict = cc.check(sends(cc, ("a", True), ("b", True)), got(cc, "a", "b"))
    assert verdict.classes == {"a": "ok", "b": "ok"}
    assert verdict.passed


def test_confirmed_never_delivered_is_lost(cc):
    verdict = cc.check(sends(cc, ("a", True), ("b", True)), got(cc, "b"))
    assert verdict.classes == {"a": "lost", "b": "ok"}
    assert not verdict.passed


def test_twice_is_duplicated_confirmed_or_not(cc):
    verdict = cc.check(sends(cc, ("a", True), ("b", False)), got(cc, "a", "b", "a", "b"))
    assert verdict.classes == {"a": "duplicated", "b": "duplicated"}
    assert verdict.totals()["duplicated"] == 2
    assert not verdict.passed


def test_unsent_or_misrouted_delivery_is_unexpected(cc):
    verdict = cc.check(sends(cc, ("a", True)), got(cc, "a", "zzz") + got(cc, "a", recipient="other"))
    assert verdict.classes == {"a": "ok"}
    assert {(d.recipient, d.msg_id) for d in verdict.unexpected} == {("r", "zzz"), ("other", "a")}
    assert verdict.totals()["unexpected"] == 2
    assert not verdict.passed


def test_overtaken_by_a_later_send_is_reordered(cc):
    verdict = cc.check(sends(cc, ("a", True), ("b", True), ("c", True)), got(cc, "b", "c", "a"))
    assert verdict.classes == {"a": "reordered", "b": "ok", "c": "ok"}
    assert verdict.passed  # reported, not failed


def test_reorder_is_per_pair(cc):
    mixed = [cc.Send("s", "r", "a", 0, True), cc.Send("t", "r", "b", 0, True), cc.Send("s", "r", "c", 1, True)]
    verdict = cc.check(mixed, got(cc, "b", "a", "c"))
    assert set(verdict.classes.values()) == {"ok"}


def test_unconfirmed_is_unknown_whether_or_not_it_arrived(cc):
    verdict = cc.check(sends(cc, ("a", False), ("b", False), ("c", True)), got(cc, "b", "c"))
    assert verdict.classes == {"a": "unknown", "b": "unknown", "c": "ok"}
    assert verdict.unknown_delivered == 1
    assert verdict.totals() == {
        "ok": 1,
        "lost": 0,
        "duplicated": 0,
        "redelivered": 0,
        "reordered": 0,
        "unknown": 2,
        "unexpected": 0,
    }
    assert verdict.passed


def test_unknown_sends_do_not_make_reorders(cc):
    verdict = cc.check(sends(cc, ("a", True), ("b", False), ("c", True)), got(cc, "b", "a", "c"))
    assert verdict.classes == {"a": "ok", "b": "unknown", "c": "ok"}


def test_a_repeat_the_gateway_flagged_is_redelivered_and_an_unflagged_one_duplicated(cc):
    deliveries = [
        cc.Delivery("r", "m1", 1),
        cc.Delivery("r", "m1", 2, redelivered=True),  # its reader died before the confirm
        cc.Delivery("r", "m2", 3),
        cc.Delivery("r", "m2", 4),  # nothing announced it
    ]
    verdict = cc.check(sends(cc, ("m1", True), ("m2", True)), deliveries)
    assert verdict.classes == {"m1": "redelivered", "m2": "duplicated"}
    assert not verdict.passed
    assert cc.check(sends(cc, ("m1", True)), deliveries[:2]).passed
