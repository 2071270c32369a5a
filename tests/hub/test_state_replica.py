"""The hub records' replica: published as numbered copies, newer copies loaded, local
changes noticed; against a stand-in for the broker queue that keeps the newest copy."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bridgecli.errors import BrokerUnavailable
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.state_replica import STATE_QUEUE, VERSION_HEADER, StateReplica


class OneCopyQueue:
    """``bridge.hub.state`` as a channel sees it: x-max-length 1, drop-head."""

    def __init__(self) -> None:
        self.head: tuple[dict, bytes] | None = None
        self.nacked = 0

    def basic_publish(self, exchange, key, body, props, mandatory=False):
        assert (exchange, key, mandatory) == ("", STATE_QUEUE, True)
        self.head = (props.headers, body)

    def basic_get(self, queue, auto_ack):
        assert queue == STATE_QUEUE and not auto_ack
        if self.head is None or self.taken:
            return None, None, None
        self.taken = True
        return SimpleNamespace(delivery_tag=1), SimpleNamespace(headers=self.head[0]), self.head[1]

    def basic_nack(self, tag, multiple, requeue):
        assert requeue and multiple
        self.nacked += 1
        self.taken = False

    taken = False


def test_changes_travel_from_one_registrar_to_another(tmp_path):
    queue = OneCopyQueue()
    first, second = HubStore(tmp_path / "a.db"), HubStore(tmp_path / "b.db")
    one, two = StateReplica(first.db), StateReplica(second.db)
    one.start(queue)  # nothing there yet: publishes its records as version 1
    assert queue.head is not None and queue.head[0] == {VERSION_HEADER: 1}
    first.add_host("hostb", "hostb")
    assert one.changed()
    one.push(queue)
    assert not one.changed() and queue.head[0] == {VERSION_HEADER: 2}
    two.start(queue)  # a newer copy than it holds: loaded, and the peek left it queued
    assert two.version == 2 and [h.host for h in second.hosts()] == ["hostb"]
    assert not two.changed() and queue.nacked >= 1
    assert [h.host for h in HubStore(tmp_path / "b.db").hosts()] == ["hostb"]  # on disk too
    second.add_invite("inv1", "hostc", 2e9, False)
    two.sync(queue)  # its own change: published on top
    one.sync(queue)
    assert one.version == 3 and first.invite("inv1") is not None


def test_another_process_writing_the_file_is_published(tmp_path):
    queue = OneCopyQueue()
    store = HubStore(tmp_path / "hub.db")
    replica = StateReplica(store.db)
    replica.start(queue)
    HubStore(tmp_path / "hub.db").add_invite("inv2", "hostd", 2e9, False)  # e.g. `bridge hub invite`
    assert replica.changed()
    replica.sync(queue)
    assert queue.head is not None and queue.head[0] == {VERSION_HEADER: 2}
    other = HubStore(tmp_path / "copy.db")
    StateReplica(other.db).pull(queue)
    assert other.invite("inv2") is not None


def test_an_older_copy_is_not_loaded(tmp_path):
    queue = OneCopyQueue()
    store = HubStore(tmp_path / "hub.db")
    replica = StateReplica(store.db)
    replica.start(queue)
    store.add_host("hoste", "hoste")
    replica.push(queue)
    queue.head = ({VERSION_HEADER: 1}, queue.head[1])
    assert not replica.pull(queue) and store.host("hoste") is not None


def test_a_node_never_publishes_records_it_did_not_load(tmp_path):
    queue = OneCopyQueue()
    node = StateReplica(HubStore(tmp_path / "node.db").db, origin=False)
    with pytest.raises(BrokerUnavailable):
        node.start(queue, pause=0)
    assert queue.head is None
    hub = HubStore(tmp_path / "hub.db")
    hub.add_host("hostf", "hostf")
    StateReplica(hub.db).start(queue, pause=0)
    node.start(queue, pause=0)
    assert node.version == 1
