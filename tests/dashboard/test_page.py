"""The dashboard end to end in real headless Chromium, against a live broker and the
gateways of two simulated hosts: the fleet, live traffic, a DLQ retry clicked on the page,
hostile content kept inert, and updates that go on after the gateway restarts.

The screenshot in docs/ comes from here: ``UPDATE_DOCS_SCREENSHOT=1`` writes it to
docs/dashboard.png (otherwise into the test's temp dir, so a plain run leaves the tree clean)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.dashboard.letters import dead_letter
from tests.dashboard.page import Page
from tests.support.chromium import wait_for

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = '<img src=x onerror="window.pwned=1"></script><script>window.pwned=2</script>'


def test_the_page_live(host_factory, dashboard_factory, chromium_factory, host_bridge, rabbitmq, tmp_path):
    from tests.browser.fake_executor import FakeExecutor

    broker = host_bridge(label="orchestrator")  # the browser broker of host alpha
    executor = FakeExecutor(broker.port, "test-token", id="exec-1", label="chrome-1", default=True).start()
    broker.send("open", "research", {"url": "about:blank"})
    a = host_factory("alpha", extra_env={"BRIDGE_BROWSER_PORT": str(broker.port), "BRIDGE_BROWSER_TOKEN": "test-token"})
    b = host_factory("beta")
    main = a.register("main", role="main")
    worker = b.register("worker")
    a.start_gateway()
    b.start_gateway()
    board = dashboard_factory(a)
    page = Page(chromium_factory(), board.url)
    try:
        # the browser bridge: its executor, the agent and the group that agent owns
        wait_for(
            lambda: page.texts("#executors tbody td")[:4] == ["chrome-1", "exec-1", "fake", "yes"],
            15,
            "the executor in the browser view",
        )
        assert page.texts("#agents tbody td:first-child") == ["orchestrator"]
        assert page.texts("#groups tbody tr")[0].startswith("researchchrome-1orchestrator")

        # the fleet shows both hosts and their entities; the page got in with the token
        wait_for(
            lambda: {a.name, b.name} <= {t.split(" ")[0] for t in page.texts("#hosts tbody td:first-child")},
            30,
            "both hosts in the fleet",
        )
        wait_for(
            lambda: {"main", "worker"} <= set(page.texts("#entities tbody td:first-child")),
            30,
            "both entities in the fleet",
        )
        assert page.js("document.cookie") == ""  # HttpOnly: the page's scripts cannot read the token

        # a message sent with `bridge send` appears in the traffic view
        sent = b.bridge_json("send", "main", "hello from beta", "--from", "worker")
        row = f'#traffic tr[data-msg-id="{sent["msgId"]}"]'
        wait_for(lambda: page.js(f"document.querySelector('{row}') !== null"), 10, "the message in the traffic view")
        assert "hello from beta" in page.texts(row)[0] and "worker → main" in page.texts(row)[0]
        wait_for(lambda: "main" in page.texts("#held tbody td:first-child"), 10, "main's held message")

        # filters: the fleet by host and label, the traffic by entity; pause holds new rows back
        page.js(
            f"(() => {{ const s = document.getElementById('filter-host'); s.value = {json.dumps(b.name)};"
            " s.dispatchEvent(new Event('input')); })()"
        )
        assert page.texts("#entities tbody td:first-child") == ["worker"]
        page.js(
            "(() => { const s = document.getElementById('filter-host'); s.value = '';"
            " s.dispatchEvent(new Event('input')); })()"
        )
        page.type("#filter-label", "mai")
        assert page.texts("#entities tbody td:first-child") == ["main"]
        page.type("#filter-label", "")
        page.type("#traffic-filter", "nobody-is-called-this")
        assert page.texts("#traffic tbody tr") == []
        page.type("#traffic-filter", "work")
        assert len(page.texts("#traffic tbody tr")) == 1
        page.type("#traffic-filter", "")
        page.click("#pause")
        held_back = b.bridge_json("send", "main", "while paused", "--from", "worker")
        wait_for(lambda: "paused: 1 new message(s) not shown" in page.texts("#traffic-note")[0], 10, "the pause note")
        assert page.js(f"document.querySelector('#traffic tr[data-msg-id=\"{held_back['msgId']}\"]')") is None
        page.click("#pause")
        assert page.js(f"document.querySelector('#traffic tr[data-msg-id=\"{held_back['msgId']}\"]') !== null")

        # hostile content stays text: no element is made of it and no script of it runs
        evil = b.bridge_json("send", "main", HOSTILE, "--from", "worker")
        evil_row = f'#traffic tr[data-msg-id="{evil["msgId"]}"]'
        wait_for(lambda: page.js(f"document.querySelector('{evil_row}') !== null"), 10, "the hostile message")
        page.click(evil_row)
        wait_for(lambda: page.texts("#message-content") == [HOSTILE], 10, "the opened hostile message")
        assert any(HOSTILE[:40] in t for t in page.texts("#traffic td.content"))
        assert page.js("document.querySelectorAll('img, script:not([src])').length") == 0
        assert page.js("typeof window.pwned") == "undefined"

        # a dead letter (with a hostile detail) retried by clicking on the page is delivered
        dead = dead_letter(board_uri(a), worker, main, "retry me", HOSTILE)
        dlq_row = f'#dlq tr[data-id="{dead}"]'
        wait_for(lambda: page.js(f"document.querySelector('{dlq_row}') !== null"), 15, "the dead letter on the page")
        assert HOSTILE in page.texts(f"{dlq_row} td:nth-child(4)")
        assert page.js("document.querySelectorAll('img, script:not([src])').length") == 0
        page.screenshot(
            ROOT / "docs" / "dashboard.png" if os.environ.get("UPDATE_DOCS_SCREENSHOT") else tmp_path / "dashboard.png"
        )
        page.click(f"{dlq_row} button")
        wait_for(lambda: not page.js("document.getElementById('confirm').hidden"), 5, "the confirmation")
        assert dead in page.texts("#confirm-text")[0]
        page.click("#confirm-yes")
        wait_for(lambda: "re-published 1 message(s)" in page.texts("#dlq-result")[0], 15, "the retry's result")
        got = b.bridge_json("poll", "--as", "worker", "--wait", "10s")["messages"]
        assert [m["msgId"] for m in got] == [dead] and got[0]["content"] == "retry me"
        wait_for(lambda: page.js(f"document.querySelector('{dlq_row}') === null"), 15, "the retried letter gone")

        # throughput: beta sent, alpha had delivered, and beta's worker had a dead letter
        def total(host: str, series: str) -> int:
            return page.js(
                f"((window.bridgeDashboard.rates || {{}})[{json.dumps(host)}] || {{}})"
                f"[{json.dumps(series)}]?.reduce((a, b) => a + b, 0) || 0"
            )

        wait_for(
            lambda: total(b.name, "sent") >= 2 and total(a.name, "delivered") >= 2 and total(b.name, "dead") >= 1,
            10,
            "the rates of both hosts",
        )
        assert page.js("document.querySelectorAll('#rates svg.spark polyline').length") == 6

        # the gateway restarts; the page keeps updating (fleet, held, traffic)
        a.stop_gateway()
        wait_for(
            lambda: any("no local gateway" in t for t in page.texts("#missing li")),
            15,
            "the page saying the gateway is missing",
        )
        a.start_gateway()
        wait_for(
            lambda: any(e["gid"] == main for e in b.bridge_json("roster")["entries"]), 15, "main back in beta's roster"
        )
        after = b.bridge_json("send", "main", "after the restart", "--from", "worker")
        wait_for(
            lambda: page.js(f"document.querySelector('#traffic tr[data-msg-id=\"{after['msgId']}\"]') !== null"),
            15,
            "traffic after the restart",
        )
        wait_for(lambda: not page.texts("#missing li"), 15, "the gateway back on the page")
        wait_for(
            lambda: ["main", main[:13], "main", "4"] == page.texts("#held tbody td")[:4],
            15,
            "main's four held messages after the restart",
        )
    finally:
        page.close()
        executor.stop()


def board_uri(host) -> str:
    return host.env["BRIDGE_BROKER_URI"]
