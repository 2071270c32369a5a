"""Without a local gateway the dashboard shows what it can reach — the roster, traffic and
dead letters — and says plainly what is missing and why."""

from __future__ import annotations

from tests.support.chromium import wait_for


def test_without_a_local_gateway(host_factory, dashboard_factory, vhost_uri):
    b = host_factory("beta", broker_uri=vhost_uri, extra_env={"BRIDGE_ROSTER_INTERVAL": "1"})
    worker = b.register("worker")
    main = b.register("main", role="main")
    b.start_gateway()
    lonely = host_factory("lonely", broker_uri=vhost_uri)  # no gateway here
    board = dashboard_factory(lonely)

    def state() -> dict:
        return board.get_json("/api/state")

    first = state()
    assert first["held"] is None
    assert any("no local gateway on this host" in m and "start `bridge gateway`" in m for m in first["missing"])
    # the fleet from the dashboard's own roster listener
    wait_for(lambda: {e["gid"] for e in state()["fleet"]["entities"]} >= {worker, main}, 15, "beta's entities")
    assert [h["host"] for h in state()["fleet"]["hosts"]] == [b.name]
    # traffic from the tap, and the message opens in full
    sent = b.bridge_json("send", "main", "seen without a gateway", "--from", "worker")
    wait_for(
        lambda: board.request("GET", f"/api/message/{sent['msgId']}", {"Cookie": board.cookie}).status == 200,
        10,
        "the message in the dashboard's history",
    )
    assert board.get_json(f"/api/message/{sent['msgId']}")["message"]["content"] == "seen without a gateway"
    letters = state()["deadLetters"]
    assert letters["error"] is None and letters["rows"] == []  # read: this vhost's DLQ is empty
    # the host going away is shown as gone, not dropped
    b.stop_gateway()
    wait_for(
        lambda: [(h["host"], h["gone"]) for h in state()["fleet"]["hosts"]] == [(b.name, True)],
        15,
        "beta shown as gone",
    )
    assert {e["status"] for e in state()["fleet"]["entities"]} == {"gone"}
