"""Committed bursts wait a little for their store sync and acks, so that one sync serves
several; a delivery with nothing after it is still synced and acked, on a real broker."""

from __future__ import annotations

from tests.multihost.helpers import wait_for


def _inbox_counts(rabbitmq, gid: str) -> tuple[int, int] | None:
    """(ready, unacked) of ``gid``'s inbox on the broker, or None before it exists."""
    out = rabbitmq.ctl(
        "list_queues", "name", "messages_ready", "messages_unacknowledged", "-q", "--no-table-headers"
    ).stdout
    for line in out.splitlines():
        name, ready, unacked = line.split()
        if name == f"agent.{gid}.inbox":
            return int(ready), int(unacked)
    return None


def test_a_lone_delivery_is_synced_and_acked_with_no_traffic_after_it(host_factory, rabbitmq):
    a = host_factory("a")
    main = a.register("main", role="main")
    a.register("peer")
    a.start_gateway()
    sent = a.bridge_json("send", main, "the only one", "--from", "peer")
    wait_for(lambda: _inbox_counts(rabbitmq, main) == (0, 0), what="the delivery acked")
    status = a.bridge_json("status")
    assert status["store"]["syncs"] >= 1, status["store"]  # the ack followed a sync
    [held] = a.bridge_json("poll", "--as", main)["messages"]
    assert held["msgId"] == sent["msgId"]
