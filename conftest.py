"""Root conftest: registers the shared fixture modules under tests/support.

Append a module here when you add real-component fixtures (tmux, Chromium, …) so that the
plugin test suites under plugins/*/tests can use them too.
"""

import os

import pytest

pytest_plugins = [
    "tests.support.rabbitmq",
    "tests.support.env",
    "tests.support.chromium",
    "tests.support.hosts",
    "tests.support.netns",
]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On CI (``CI`` set, as `.ci/run` runs) a skipped test is a failure: the skips guard a
    developer's machine without tmux, Chromium, root or the mcp extra, but CI installs all of
    them, so a skip there would hide a broken setup step instead of proving anything."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped on CI, where every test must run: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same at collection: a module that skips itself whole (``pytest.importorskip`` at
    module level, when an extra is missing) fails the run on CI instead of vanishing."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"{collector.nodeid} skipped at collection on CI, where every test must run: {reason}"
