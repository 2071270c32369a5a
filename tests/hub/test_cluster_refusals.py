"""A cluster hub's answers and refusals that need no cluster: the wrong invite kind at the
registrar, the ``nodes`` request, and cluster commands on a hub made without --cluster
(exit code NOT_A_CLUSTER)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bridgecli.errors import ExitCode, NotACluster
from bridgecli.hub import cluster, layout
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.invite import ENROL_USER_PREFIX
from bridgecli.hub.layout import HubSettings
from bridgecli.hub.registrar import Registrar

T0 = 1_800_000_000.0


@pytest.fixture
def store(tmp_path) -> Iterator[HubStore]:
    store = HubStore(tmp_path / "hub.db")
    yield store
    store.close()


@pytest.fixture
def registrar(store, admin) -> Registrar:
    return Registrar(store, admin, "hub-test", "hubhost", clock=lambda: T0, cluster=True)


def _ask(registrar: Registrar, op: str, invite_id: str, host: str) -> dict:
    request = {"op": op, "host": host, "password": "p" * 32, "time": T0}
    return registrar.handle(request, ENROL_USER_PREFIX + invite_id)


def _refused(answer: dict, kind: str, words: str) -> None:
    assert answer["ok"] is False and answer["kind"] == kind and words in answer["error"], answer


def test_each_invite_kind_enrols_only_its_own_way(registrar, store):
    store.add_invite("aaaaaaaaaaaa", "node2", T0 + 3600, False, kind="node", address="192.0.2.11")
    store.add_invite("bbbbbbbbbbbb", "hostx", T0 + 3600, False)
    _refused(_ask(registrar, "enrol", "aaaaaaaaaaaa", "node2"), "invite", "node invite")
    _refused(_ask(registrar, "enrol-node", "bbbbbbbbbbbb", "hostx"), "invite", "host invite")
    assert store.invite("aaaaaaaaaaaa").state(T0) == "open"  # a refusal does not use it
    assert store.invite("bbbbbbbbbbbb").state(T0) == "open"


def test_joined_hosts_ask_for_every_nodes_address(registrar, store, admin):
    store.add_node("hub", "192.0.2.10:5671", "bridge@192.0.2.10")
    store.add_node("node2", "192.0.2.11:5671", "bridge@192.0.2.11")
    answer = registrar.handle({"op": "nodes"}, registrar.local_user)
    assert answer == {"ok": True, "cluster": True, "brokers": ["192.0.2.10:5671", "192.0.2.11:5671"]}
    _refused(registrar.handle({"op": "nodes"}, "stranger"), "denied", "not a joined host")
    plain = Registrar(store, admin, "hub-test", "hubhost", clock=lambda: T0)
    assert plain.handle({"op": "nodes"}, plain.local_user) == {"ok": True}


def test_cluster_commands_on_a_plain_hub(bridge_home):
    plain = HubSettings(hub_id="hub", host_id="hub", listen=[("192.0.2.10", 5671)], active=True)
    layout.save(plain)
    with pytest.raises(NotACluster) as refused:
        cluster.create_node_invite("node2", "192.0.2.11", 3600)
    assert refused.value.exit_code == ExitCode.NOT_A_CLUSTER and "--cluster" in refused.value.hint
    with pytest.raises(NotACluster):
        cluster.check_cluster_start(plain, True)
    with pytest.raises(NotACluster):
        cluster.list_nodes()
    with pytest.raises(NotACluster):
        cluster.remove_node("node2")
    cluster.check_cluster_start(plain, False)  # a plain start stays as it was


def test_a_cluster_tool_that_does_not_finish_is_a_timeout_and_a_start_only_warns(tmp_path, caplog):
    """A busy cluster's CLI tools can outlast their timeout: that is a Timeout (exit code
    and fix), never a crash, and settling partition handling after a start only warns."""
    from bridgecli.errors import Timeout
    from bridgecli.node_dist import ClusterNode, DistTls

    files = tmp_path / "files"
    files.mkdir()
    node = ClusterNode(
        tmp_path / "broker", DistTls("127.0.0.1", files / "node.pem", files / "node.key", files / "ca.pem")
    )
    node.base.mkdir()
    with pytest.raises(Timeout) as raised:
        node.ctl("status", timeout=0.01)
    assert raised.value.exit_code == ExitCode.TIMEOUT and "did not finish" in raised.value.message
    with caplog.at_level("WARNING", logger="bridgecli.hub"):
        assert cluster.settle_partitions(node) is None  # its node does not run: no answer
    assert "partition handling was not set" in caplog.text
