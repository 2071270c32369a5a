"""Receipts in the dashboard's traffic view: each message sent from this host shows the
furthest state it reached, live, as the local gateway records its receipts; a state another
host reports stays text however it is written. Real gateways, broker and `bridge dashboard`;
the page in headless Chromium."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator

import pytest

from tests.dashboard.letters import receipt
from tests.dashboard.page import Page
from tests.support.chromium import wait_for

HOSTILE = '<img src=x onerror="window.pwned=1"></script><script>window.pwned=2</script>'


def _events(board, timeout: float = 30.0) -> Iterator[dict]:
    """The updates of one `/api/events` stream, as the page gets them, for ``timeout`` seconds."""
    connection = http.client.HTTPConnection("127.0.0.1", board.port, timeout=10)
    connection.request("GET", "/api/events", headers={"Host": f"127.0.0.1:{board.port}", "Cookie": board.cookie})
    response = connection.getresponse()
    assert response.status == 200
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            line = response.readline()
            assert line, "the event stream ended"
            if line.startswith(b"data: "):
                yield json.loads(line[6:])
    finally:
        connection.close()


def _states_until(stream: Iterator[dict], msg_id: str, last: str) -> list[tuple[str, str | None]]:
    """The (state, detail) of ``msg_id`` each update carried, up to the first ``last``."""
    seen: list[tuple[str, str | None]] = []
    for update in stream:
        shown = update.get("receipts", {}).get(msg_id)
        if shown is not None:
            seen.append((shown["state"], shown.get("detail")))
            if shown["state"] == last:
                return seen
    pytest.fail(f"the stream never showed {msg_id} {last}; it showed {seen}")


def _tapping(board) -> None:
    """Wait until the dashboard's taps are bound: a message sent before would not be seen."""
    wait_for(lambda: board.get_json("/api/state")["broker"]["connected"], 15, "the dashboard's broker connection")


@pytest.mark.slow
def test_the_stream_carries_delivered_then_read(host_factory, dashboard_factory):
    a = host_factory("alpha")
    a.register("main", role="main")
    a.register("worker")
    a.start_gateway()
    board = dashboard_factory(a)
    stream = _events(board)
    sent = a.bridge_json("send", "worker", "please review", "--from", "main")
    # delivered (held) before anyone polled: the stream says so, and has not said read
    assert _states_until(stream, sent["msgId"], "delivered")[-1] == ("delivered", "held")
    got = a.bridge_json("poll", "--as", "worker")
    assert [m["msgId"] for m in got["messages"]] == [sent["msgId"]]
    assert _states_until(stream, sent["msgId"], "read")[-1] == ("read", "poll")
    cell = board.get_json("/api/state")["receipts"][sent["msgId"]]
    assert set(cell["states"]) >= {"delivered", "read"} and cell["states"]["read"]["how"] == "poll"


@pytest.mark.slow
def test_receipts_off_leave_the_column_blank_without_a_complaint(host_factory, dashboard_factory):
    a = host_factory("alpha", extra_env={"BRIDGE_RECEIPTS_ENABLED": "false"})
    a.register("main", role="main")
    a.register("worker")
    a.start_gateway()
    board = dashboard_factory(a)
    _tapping(board)
    sent = a.bridge_json("send", "worker", "untracked", "--from", "main")
    wait_for(
        lambda: board.request("GET", f"/api/message/{sent['msgId']}", {"Cookie": board.cookie}).status == 200,
        10,
        "the message in the dashboard's history",
    )
    a.bridge_json("poll", "--as", "worker")
    state = board.get_json("/api/state")
    assert state["receipts"] == {} and state["missing"] == []


@pytest.mark.slow
def test_the_traffic_view_shows_each_state(host_factory, dashboard_factory, chromium_factory):
    a, b = host_factory("alpha"), host_factory("beta")
    a.register("main", role="main")
    worker = b.register("worker")
    b.register("boss", role="main")
    a.start_gateway()
    b.start_gateway()
    wait_for(lambda: any(e["gid"] == worker for e in a.bridge_json("roster")["entries"]), 30, "worker in a's roster")
    board = dashboard_factory(a)
    _tapping(board)
    page = Page(chromium_factory(), board.url)

    def state_of(msg_id: str) -> tuple[str, str, str] | None:
        """(state, small text, tooltip) of the message's row; None before the row is drawn."""
        return page.js(
            f"(() => {{ const r = document.querySelector('#traffic tr[data-msg-id=\"{msg_id}\"]');"
            " if (!r) return null; const c = r.querySelector('td.receipt');"
            " const s = c.querySelector('.state'), d = c.querySelector('small');"
            " return [s ? s.textContent : '', d ? d.textContent : '', c.title]; })()"
        )

    try:
        # sent from this host: delivered (held) on beta, then read once the worker polls
        sent = a.bridge_json("send", worker, "please review", "--from", "main")["msgId"]
        wait_for(lambda: (state_of(sent) or [""])[0] == "delivered", 20, "the message shown delivered")
        assert state_of(sent)[1] == "held" and "read" not in state_of(sent)[2]
        assert [m["msgId"] for m in b.bridge_json("poll", "--as", "worker")["messages"]] == [sent]
        wait_for(lambda: (state_of(sent) or [""])[0] == "read", 20, "the message shown read")
        shown = state_of(sent)
        assert shown[1] == "poll" and "delivered" in shown[2] and "(held)" in shown[2] and "(poll)" in shown[2]

        # sent from another host: this host has no record of it, the cell stays blank
        theirs = b.bridge_json("send", "main", "from beta", "--from", "boss")["msgId"]
        wait_for(lambda: state_of(theirs) is not None, 10, "beta's message in the traffic view")
        assert state_of(theirs) == ["", "", ""]

        # beta says a message was dead-lettered, with markup in its reason: shown as text
        doomed = a.bridge_json("send", worker, "you will not get this", "--from", "main")["msgId"]
        wait_for(lambda: (state_of(doomed) or [""])[0] == "delivered", 20, "the second message delivered")
        receipt(a.env["BRIDGE_BROKER_URI"], a.name, b.name, doomed, worker, state="dead-lettered", reason=HOSTILE)
        wait_for(lambda: state_of(doomed)[0] == "dead-lettered", 20, "the message shown dead-lettered")
        _, small, title = state_of(doomed)
        assert small.endswith("…") and HOSTILE.startswith(small[:-1]) and len(small) > 10  # cut, as text
        assert "(held)\ndead-lettered" in title and title.endswith(f"({HOSTILE})")  # all of it, as text
        assert page.js("document.querySelectorAll('img, script:not([src])').length") == 0
        assert page.js("typeof window.pwned") == "undefined"
    finally:
        page.close()
