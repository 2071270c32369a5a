"""Scale-out: quorum inboxes on a three-node RabbitMQ cluster, gateways listing every node.

Runs on loopback (no namespaces): the point is the broker's own replication and the
gateway's multi-URI failover, not the network.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.multihost.cluster import Cluster, leader_failover

pytestmark = pytest.mark.slow


def test_cluster_forms_from_config(rabbitmq_cluster: Cluster):
    assert sorted(rabbitmq_cluster.running_nodes()) == sorted(rabbitmq_cluster.names)


def test_killing_the_quorum_leader_mid_burst_loses_nothing(rabbitmq_cluster: Cluster, tmp_path: Path):
    outcome = leader_failover(rabbitmq_cluster, tmp_path)
    assert outcome.sent > 20, outcome
    assert outcome.lost == 0, outcome
    assert outcome.delivered == outcome.sent, outcome
    assert outcome.duplicated == 0, outcome
    # the killed node held the leader; a surviving node took over
    old, new = outcome.notes[0].removeprefix("leader ").split(" -> ")
    assert new != "None" and new != old, outcome
