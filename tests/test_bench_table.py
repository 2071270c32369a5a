"""bench/run_all.py's table merge: a benchmark that failed or was skipped must not pass its
old figures off as fresh."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

RUN_ALL = Path(__file__).resolve().parents[1] / "bench" / "run_all.py"
OLD = "2026-12-01 10:00"
NOW = "2026-12-05 09:30"


@pytest.fixture(scope="module")
def run_all():
    spec = importlib.util.spec_from_file_location("bench_run_all", RUN_ALL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(benchmark: str, metric: str, value: str, note: str = "", measured: str = OLD) -> dict:
    return {
        "benchmark": benchmark,
        "metric": metric,
        "value": value,
        "unit": "ms",
        "baseline": "raw 1 ms",
        "ratio": "2x",
        "note": note,
        "measured": measured,
    }


EXISTING = [
    row("alpha", "a1", "1.0", "median of 5"),
    row("alpha", "a2", "2.0"),
    row("beta", "b1", "3.0", "n=10"),
    row("gamma", "g1", "4.0", "old note"),
]


def test_ran_replaces_failed_and_skipped_go_stale_untried_stay(run_all):
    fresh = [{**row("beta", "b1", "9.0", "n=10"), "measured": None}]
    merged = run_all.merge(EXISTING, fresh, {"alpha": "failed", "beta": "ran", "gamma": "skipped"}, NOW)
    by_metric = {r["metric"]: r for r in merged}
    assert [r["benchmark"] for r in merged] == ["alpha", "alpha", "beta", "gamma"]
    assert by_metric["b1"]["value"] == "9.0" and by_metric["b1"]["measured"] == NOW
    # old figures keep their own date, and say why they were not renewed
    assert by_metric["a1"]["value"] == "1.0" and by_metric["a1"]["measured"] == OLD
    assert by_metric["a1"]["note"] == f"stale: failed in the run of {NOW} UTC; median of 5"
    assert by_metric["a2"]["note"] == f"stale: failed in the run of {NOW} UTC"
    assert by_metric["g1"]["note"] == f"stale: skipped in the run of {NOW} UTC; old note"

    untouched = run_all.merge(EXISTING, [], {"beta": "failed"}, NOW)
    assert [r for r in untouched if r["benchmark"] != "beta"] == [r for r in EXISTING if r["benchmark"] != "beta"]


def test_a_second_failure_replaces_the_marker(run_all):
    once = run_all.merge(EXISTING, [], {"gamma": "failed"}, "2026-12-03 08:00")
    twice = run_all.merge(once, [], {"gamma": "skipped"}, NOW)
    notes = [r["note"] for r in twice if r["benchmark"] == "gamma"]
    assert notes == [f"stale: skipped in the run of {NOW} UTC; old note"]


def test_doc_round_trip_dates_rows_of_an_undated_table(run_all, tmp_path, monkeypatch):
    legacy = (
        "# Benchmarks\n\n<!-- bench:start -->\n_Last run: 2026-12-01 10:00 UTC, Python 3.11.7, x86_64._\n\n"
        "| benchmark | metric | value | unit | baseline | ratio | note |\n"
        "| --- | --- | --- | --- | --- | --- | --- |\n"
        "| alpha | a \\| pipe | 1.0 | ms | raw 1 ms | 2x | median of 5 |\n"
        "| beta | b1 | 3.0 | ms | raw 1 ms | 2x | n=10 |\n"
        "<!-- bench:end -->\n\n## Notes\nkept\n"
    )
    doc = tmp_path / "benchmarks.md"
    doc.write_text(legacy)
    monkeypatch.setattr(run_all, "DOC", doc)
    assert [r["measured"] for r in run_all.parse_existing(legacy)] == [f"<= {OLD}", f"<= {OLD}"]

    run_all.write_doc([row("beta", "b1", "9.0")], {"alpha": "failed", "beta": "ran"}, NOW)
    text = doc.read_text()
    assert text.endswith("<!-- bench:end -->\n\n## Notes\nkept\n")
    assert f"_Last run: {NOW} UTC" in text and "(ran: beta; failed: alpha)" in text
    rows = run_all.parse_existing(text)
    assert rows == [
        row("alpha", "a | pipe", "1.0", f"stale: failed in the run of {NOW} UTC; median of 5", measured=f"<= {OLD}"),
        row("beta", "b1", "9.0", measured=NOW),
    ]
