"""The roster listener: roster.<host> on a connection of its own, read in batches."""

from __future__ import annotations

from tests.gateway.test_publishing import _connections
from tests.multihost.helpers import wait_for

FAST = {"BRIDGE_ROSTER_INTERVAL": "0.5"}


def _labels(host) -> set[str]:
    return {e["label"] for e in host.bridge_json("roster", "--json")["entries"]}


def test_the_listener_has_its_own_connection_and_comes_back_after_losing_it(host_factory, rabbitmq_node_factory):
    node = rabbitmq_node_factory([])
    a = host_factory("a", broker_uri=node.uri, extra_env=FAST)
    b = host_factory("b", broker_uri=node.uri, extra_env=FAST)
    a.register("alpha", role="main")
    b.register("beta")
    a.start_gateway(), b.start_gateway()
    wait_for(lambda: _labels(a) == {"alpha", "beta"}, 20, what="a's view of both hosts")
    [listener] = [pid for pid, name, _ in _connections(node) if name == f"bridge-gateway-{a.name}-roster"]
    node.ctl("close_connection", listener, "test: drop the roster listener")
    wait_for(lambda: "roster connection lost" in a.log_path.read_text(), 20, what="the listener to notice")
    b.register("gamma")  # announced while a's listener reconnects, or after: a still learns it
    wait_for(lambda: _labels(a) == {"alpha", "beta", "gamma"}, 20, what="a's view after the listener reconnected")
    assert "roster listener not connected" not in a.bridge_json("status")["extra"]["roster"]
    assert a.gateway.poll() is None  # the gateway itself never noticed
