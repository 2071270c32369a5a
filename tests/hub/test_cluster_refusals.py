"""A cluster hub's answers and refusals that need no cluster: the wrong invite kind at the
registrar, the ``nodes`` request, cluster commands on a hub made without --cluster (exit
code NOT_A_CLUSTER), and which node a ``--cluster`` start converts, or refuses to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bridgecli import localbroker
from bridgecli.errors import Conflict, ExitCode, NotACluster
from bridgecli.hub import cluster, convert, layout
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.invite import ENROL_USER_PREFIX
from bridgecli.hub.layout import HubSettings
from bridgecli.hub.registrar import Registrar
from bridgecli.rabbitnode import default_nodename

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
    assert refused.value.exit_code == ExitCode.NOT_A_CLUSTER and "hub start --cluster" in refused.value.hint
    with pytest.raises(NotACluster):
        cluster.list_nodes()
    with pytest.raises(NotACluster):
        cluster.remove_node("node2")


def test_which_node_a_cluster_start_converts(bridge_home):
    plain = HubSettings(hub_id="hub", host_id="hub", listen=[("192.0.2.10", 5671)], active=True)
    assert convert.old_node(plain, True) is None  # no database yet: a new cluster node
    own = default_nodename(localbroker.broker_dir())
    mnesia = localbroker.broker_dir() / "mnesia"
    for name in (own, f"{own}-plugins-expand", "bridge@192.0.2.10"):
        (mnesia / name).mkdir(parents=True)
    assert convert.old_node(plain, True) == own
    assert convert.old_node(plain, False) is None  # a plain start stays as it was
    assert convert.old_node(HubSettings(hub_id="hub", host_id="hub", cluster=True), True) is None
    (mnesia / "rabbit@elsewhere").mkdir()
    (mnesia / own).rmdir()
    with pytest.raises(NotACluster) as foreign:
        convert.old_node(None, True)
    assert "rabbit@elsewhere" in foreign.value.message


def test_a_node_with_quorum_queues_is_not_converted(bridge_home):
    own = default_nodename(localbroker.broker_dir())
    (localbroker.broker_dir() / "mnesia" / own / "quorum" / own / "2F_QQ9SZF39R3PCHU").mkdir(parents=True)
    with pytest.raises(Conflict) as refused:
        convert.begin(own, "192.0.2.10")
    assert refused.value.exit_code == ExitCode.CONFLICT and "migrate-queues --to classic" in refused.value.hint
    assert convert.pending() is None  # refused before anything changed


def test_an_unfinished_conversion_keeps_the_old_name_from_starting(bridge_home):
    own = default_nodename(localbroker.broker_dir())
    (localbroker.broker_dir() / "mnesia" / own).mkdir(parents=True)
    begun = convert.begin(own, "192.0.2.10")
    assert convert.pending() == begun and begun.new == "bridge@192.0.2.10"
    with pytest.raises(Conflict) as refused:
        localbroker.start(host="hub")
    assert "hub start --cluster" in refused.value.hint
    assert localbroker.read_state() is None


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
