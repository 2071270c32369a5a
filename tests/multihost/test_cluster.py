"""Scale-out: quorum inboxes on a three-node RabbitMQ cluster, gateways listing every node.

Runs on loopback (no namespaces): the point is the broker's own replication and the
gateway's multi-URI failover, not the network. One cluster serves the module; a test that
kills a node starts it again (it rejoins by itself).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.multihost.cluster import Cluster, leader_failover

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    cluster = Cluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def healthy_cluster(cluster: Cluster) -> Iterator[Cluster]:
    yield cluster
    for node in cluster.nodes:
        if not node.is_running():
            node.start()


def test_cluster_forms_from_config(healthy_cluster: Cluster):
    assert sorted(healthy_cluster.running_nodes()) == sorted(healthy_cluster.names)


def test_killing_the_quorum_leader_mid_burst_loses_nothing(healthy_cluster: Cluster, tmp_path: Path):
    outcome = leader_failover(healthy_cluster, tmp_path, mode="leader")
    assert outcome.sent > 20, outcome
    # mid-burst: the broker had confirmed some messages when the node died, and confirmed
    # more after it, from sends started after the kill
    assert 0 < outcome.observed["confirmed at kill"] < outcome.sent, outcome
    assert outcome.times["sends confirmed again after kill"] is not None, outcome
    assert outcome.lost == 0, outcome
    assert outcome.delivered == outcome.sent, outcome
    assert outcome.duplicated == 0, outcome
    old, new = outcome.notes[0].removeprefix("leader ").split(" -> ")
    assert new != "None" and new != old, outcome


def test_gateways_fail_over_when_their_node_dies(healthy_cluster: Cluster, tmp_path: Path):
    outcome = leader_failover(healthy_cluster, tmp_path, mode="gateway-node", timeout=30)
    assert outcome.lost == 0, outcome
    assert outcome.times.get("receiver gateway reconnect") is not None, outcome
    assert outcome.times.get("sender gateway reconnect") is not None, outcome
    # and sending resumes: the publish channel that kept being nacked after the failover
    # (quorum inbox whose leader died with that node) is renewed after its first nack
    assert outcome.times.get("sends confirmed again after kill") is not None, outcome
