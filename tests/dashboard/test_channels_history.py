"""The Channels view and the history search box, end to end: real gateways on two simulated
hosts, `bridge channel join|leave` and `bridge send`, `bridge dashboard`, the page in headless
Chromium. Members appear and leave live; a search finds a sent message by a word of it; a
hostile message found by search stays text (no element, no dialog, no escape code acted on)."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from tests.dashboard.page import Page
from tests.support.chromium import wait_for

HOSTILE = "<img src=x onerror=alert(1)><script>window.pwned=1</script> \x1b[31mred\x1b]0;title\x07 needle"


def _members(page: Page, name: str) -> list[str]:
    return page.texts(f'#channels tr[data-channel="{name}"] .member')


def _history(page: Page) -> list[list[str]]:
    """The search results' cells, once the newest search was answered (else [])."""
    return page.js(
        "(() => { const s = window.bridgeDashboard.search; if (s.answered !== s.asked) return [];"
        " const rows = [...document.querySelectorAll('#history tbody tr')];"
        " return rows.map(r => [...r.cells].map(c => c.textContent)); })()"
    )


@pytest.mark.slow
def test_channels_and_history_search(host_factory, dashboard_factory, chromium_factory):
    a, b = host_factory("alpha"), host_factory("beta")
    a.register("main", role="main")
    b.register("rev")
    a.start_gateway()
    b.start_gateway()
    a.bridge_json("channel", "join", "reviewers", "--as", "main")
    b.bridge_json("channel", "join", "reviewers", "--as", "rev")
    board = dashboard_factory(a)
    page = Page(chromium_factory(), board.url)
    page.cdp.call("Page.enable", session=page.session)
    dialogs = page.cdp.waiter(lambda method, params: method == "Page.javascriptDialogOpening")
    try:
        # both hosts' members, live, with their count; the fleet lists each entity's channels
        wanted = [f"main@{a.name}", f"rev@{b.name}"]
        wait_for(lambda: _members(page, "reviewers") == wanted, 30, "both members in the channel view")
        assert page.texts('#channels tr[data-channel="reviewers"] td')[:2] == ["#reviewers", "2"]
        wait_for(
            lambda: any(t.startswith("main") and "#reviewers" in t for t in page.texts("#entities tbody tr")),
            10,
            "main's channels in the fleet",
        )

        # a word of a message sent to the channel finds it, shown as sent to #reviewers
        wait_for(lambda: board.get_json("/api/state")["broker"]["connected"], 15, "the dashboard's taps")
        sent = a.bridge_json("send", "#reviewers", "the quarterly zebra report", "--from", "main")
        row = f'#traffic tr[data-msg-id="{sent["msgId"]}"] td:nth-child(3)'
        wait_for(lambda: page.texts(row) == ["main → #reviewers"], 10, "the channel message in the traffic view")
        page.type("#history-q", "zebra")
        wait_for(lambda: len(_history(page)) == 1, 15, "the channel message found")
        [[_, direction, who, content]] = _history(page)
        assert direction == "sent" and who == "main → #reviewers" and content == "the quarterly zebra report"

        # leaving removes the member from the view
        b.bridge_json("channel", "leave", "reviewers", "--as", "rev")
        wait_for(lambda: _members(page, "reviewers") == [f"main@{a.name}"], 30, "rev gone from the channel view")

        # hostile content found by search: the same text, no element made of it, nothing run
        a.bridge_json("send", "rev", HOSTILE, "--from", "main")
        page.type("#history-q", "needle")
        wait_for(lambda: len(_history(page)) == 1, 15, "the hostile message found")
        [[_, _, who, content]] = _history(page)
        assert who == "main → rev" and content == HOSTILE
        assert page.js("document.querySelectorAll('img, script:not([src])').length") == 0
        assert page.js("typeof window.pwned") == "undefined"
        assert dialogs.events == []

        # clearing the box clears the results; a word nothing contains finds nothing
        page.type("#history-q", "")
        wait_for(lambda: page.texts("#history-note") == [""], 10, "the cleared search")
        assert _history(page) == []
        page.type("#history-q", "nosuchwordanywhere")
        wait_for(lambda: "no message matches" in page.texts("#history-note")[0], 10, "the empty result")

        # the endpoint itself: bounded text, the guard in front (no cookie, another site, rebinding)
        found = board.get_json("/api/history?q=" + quote("zebra report") + "&channel=%23reviewers")
        assert [m["content"] for m in found["messages"]] == ["the quarterly zebra report"]
        long = board.request("GET", "/api/history?q=" + "x" * 201, {"Cookie": board.cookie})
        assert long.status == 400 and "200 characters" in json.loads(long.body)["error"]
        for headers in (
            {},
            {"Cookie": board.cookie, "Origin": "http://evil.example"},
            {"Cookie": board.cookie, "Sec-Fetch-Site": "cross-site"},
            {"Cookie": board.cookie, "Host": f"evil.example:{board.port}"},
        ):
            refused = board.request("GET", "/api/history?q=zebra", headers)
            assert refused.status == 403 and b"zebra" not in refused.body, headers
    finally:
        page.cdp.drop(dialogs)
        page.close()
