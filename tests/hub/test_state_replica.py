"""The hub records' replica on a real broker's ``bridge.hub.state``: published as numbered
copies, the newest kept for later starts, newer copies heard and loaded by every running
registrar, older ones ignored, local changes noticed, a node's empty records never published."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pika
import pika.exceptions
import pytest

from bridgecli.errors import BrokerUnavailable
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.state_replica import COPIES_EXCHANGE, STATE_ARGUMENTS, STATE_QUEUE, VERSION_HEADER, StateReplica


class Registrar:
    """One registrar's side of the replica: its connection, confirm channel and listener."""

    def __init__(self, uri: str, replica: StateReplica, declare: bool = True) -> None:
        self.connection = pika.BlockingConnection(pika.URLParameters(uri))
        self.channel = self.connection.channel()
        self.channel.confirm_delivery()
        self.replica = replica
        if declare:
            replica.declare(self.channel)
        replica.listen(self.connection.channel())

    def hear(self, version: int, within: float = 10.0) -> None:
        """Run the event loop until a copy numbered ``version`` or later was heard."""
        deadline = time.monotonic() + within
        while (self.replica.newest or (0,))[0] < version:
            assert time.monotonic() < deadline, f"version {version} not heard"
            self.connection.process_data_events(time_limit=0.05)


@pytest.fixture
def registrars(vhost_uri) -> Iterator[list[Registrar]]:
    made: list[Registrar] = []
    yield made
    for one in made:
        one.connection.close()


def test_changes_travel_from_one_registrar_to_another(tmp_path, vhost_uri, registrars):
    first, second = HubStore(tmp_path / "a.db"), HubStore(tmp_path / "b.db")
    one = Registrar(vhost_uri, StateReplica(first.db))
    registrars.append(one)
    one.replica.start(one.channel, pause=0)  # nothing there yet: version 1
    assert one.replica.version == 1
    first.add_host("hostb", "hostb")
    assert one.replica.changed()
    one.replica.push(one.channel)
    assert not one.replica.changed() and one.replica.version == 2
    two = Registrar(vhost_uri, StateReplica(second.db, origin=False))
    registrars.append(two)
    two.replica.start(two.channel)  # finds the kept copy, loads it
    assert two.replica.version == 2 and [h.host for h in second.hosts()] == ["hostb"]
    assert not two.replica.changed()
    assert [h.host for h in HubStore(tmp_path / "b.db").hosts()] == ["hostb"]  # on disk too
    second.add_invite("inv1", "hostc", 2e9, False)
    two.replica.sync(two.channel)  # its own change: published on top
    one.hear(3)
    one.replica.sync(one.channel)
    assert one.replica.version == 3 and first.invite("inv1") is not None


def test_another_process_writing_the_file_is_published(tmp_path, vhost_uri, registrars):
    store = HubStore(tmp_path / "hub.db")
    hub = Registrar(vhost_uri, StateReplica(store.db))
    registrars.append(hub)
    hub.replica.start(hub.channel, pause=0)
    HubStore(tmp_path / "hub.db").add_invite("inv2", "hostd", 2e9, False)  # e.g. `bridge hub invite`
    assert hub.replica.changed()
    hub.replica.sync(hub.channel)
    assert hub.replica.version == 2
    other = HubStore(tmp_path / "copy.db")
    node = Registrar(vhost_uri, StateReplica(other.db, origin=False))
    registrars.append(node)
    node.replica.start(node.channel)  # a later start finds the kept copy
    assert node.replica.version == 2 and other.invite("inv2") is not None


def test_an_older_copy_is_not_loaded(tmp_path, vhost_uri, registrars):
    store = HubStore(tmp_path / "hub.db")
    hub = Registrar(vhost_uri, StateReplica(store.db))
    registrars.append(hub)
    hub.replica.start(hub.channel, pause=0)
    store.add_host("hoste", "hoste")
    hub.replica.push(hub.channel)
    stale = HubStore(tmp_path / "stale.db")  # a copy without hoste, numbered 1
    hub.channel.basic_publish(
        COPIES_EXCHANGE, "", stale.db.serialize(), pika.BasicProperties(headers={VERSION_HEADER: 1}), mandatory=True
    )
    hub.connection.process_data_events(time_limit=0.5)
    assert not hub.replica.pull() and store.host("hoste") is not None and hub.replica.version == 2


def test_a_node_never_publishes_records_it_did_not_load(tmp_path, vhost_uri, registrars):
    node = Registrar(vhost_uri, StateReplica(HubStore(tmp_path / "node.db").db, origin=False))
    registrars.append(node)
    with pytest.raises(BrokerUnavailable):
        node.replica.start(node.channel, pause=0)
    assert node.replica.newest is None  # nothing was published
    assert node.channel.queue_declare(STATE_QUEUE, passive=True).method.message_count == 0
    hub_store = HubStore(tmp_path / "hub.db")
    hub_store.add_host("hostf", "hostf")
    hub = Registrar(vhost_uri, StateReplica(hub_store.db))
    registrars.append(hub)
    hub.replica.start(hub.channel, pause=0)
    node.replica.start(node.channel)
    assert node.replica.version == 1


def _fix_state_queue(uri: str) -> None:
    """Replace a refusing ``bridge.hub.state`` with the real one (own connection: threads)."""
    connection = pika.BlockingConnection(pika.URLParameters(uri))
    try:
        channel = connection.channel()
        channel.queue_delete(STATE_QUEUE)
        channel.queue_declare(STATE_QUEUE, durable=True, arguments=STATE_ARGUMENTS)
    finally:
        connection.close()


def test_a_refused_copy_is_published_again_until_confirmed(tmp_path, vhost_uri, registrars):
    """The queue keeping the copy refuses it for a while: a push refused for too long
    raises; one whose queue takes it within the retry time publishes again until the broker
    confirms, and only then numbers it."""
    setup = pika.BlockingConnection(pika.URLParameters(vhost_uri))
    try:
        channel = setup.channel()
        channel.exchange_declare(COPIES_EXCHANGE, "fanout", durable=True)
        channel.queue_declare(STATE_QUEUE, arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    finally:
        setup.close()
    store = HubStore(tmp_path / "hub.db")
    hub = Registrar(vhost_uri, StateReplica(store.db), declare=False)
    registrars.append(hub)
    with pytest.raises(pika.exceptions.NackError):
        hub.replica.push(hub.channel, retry_for=0.2)
    assert hub.replica.version == 0  # not counted as published
    store.add_host("hostg", "hostg")
    fixer = threading.Timer(1.0, _fix_state_queue, args=(vhost_uri,))
    fixer.start()
    hub.replica.push(hub.channel, retry_for=30.0)  # refused until the queue is replaced
    fixer.join()
    assert hub.replica.version == 1
    other = HubStore(tmp_path / "copy.db")
    node = Registrar(vhost_uri, StateReplica(other.db, origin=False))
    registrars.append(node)
    node.replica.start(node.channel)
    assert other.host("hostg") is not None


def _records(store: HubStore) -> tuple[list[str], list[tuple[str, str]]]:
    """What a registrar would answer from: joined hosts, and each invite's state."""
    return [h.host for h in store.hosts()], [(i.invite_id, i.state(0)) for i in store.invites()]


def _hub_and_node(tmp_path, uri: str, registrars: list[Registrar]) -> tuple[list[HubStore], Registrar, Registrar]:
    """The hub machine's registrar and a node's, both started on version 1 of the records
    (``tmp_path/hub.db`` as it is on entry); returns ([their stores], hub, node)."""
    stores = [HubStore(tmp_path / "hub.db"), HubStore(tmp_path / "node.db")]
    hub = Registrar(uri, StateReplica(stores[0].db))
    registrars.append(hub)
    hub.replica.start(hub.channel, pause=0)
    node = Registrar(uri, StateReplica(stores[1].db, origin=False))
    registrars.append(node)
    node.replica.start(node.channel)
    assert node.replica.version == hub.replica.version == 1
    return stores, hub, node


def test_a_change_made_here_is_merged_with_a_newer_copy_not_overwritten(tmp_path, vhost_uri, registrars):
    """The hub machine's `bridge hub invite` writes the file while a node's active registrar
    publishes a grant: the hub's registrar keeps both and publishes them."""
    (hub_store, node_store), hub, node = _hub_and_node(tmp_path, vhost_uri, registrars)
    node_store.add_host("hostb", "hostb")  # a grant on the node's registrar: version 2
    node.replica.push(node.channel)
    HubStore(tmp_path / "hub.db").add_invite("inv-h", "hostc", 2e9, False)  # `bridge hub invite`
    hub.hear(2)
    hub.replica.sync(hub.channel)  # before: the invite was overwritten by version 2
    assert hub.replica.version == 3 and _records(hub_store) == (["hostb"], [("inv-h", "open")])
    node.hear(3)
    node.replica.sync(node.channel)
    assert node.replica.version == 3 and _records(node_store) == (["hostb"], [("inv-h", "open")])
    assert not node.replica.changed() and not hub.replica.changed()


def test_two_copies_given_one_number_are_merged_alike_on_both_sides(tmp_path, vhost_uri, registrars):
    """Two registrars publish version 2 before either hears the other. Each merges the other's
    onto version 1; on one invite both changed (used there, revoked here), the used one wins
    on both sides; both publish the same records as version 3, and then nothing more."""
    HubStore(tmp_path / "hub.db").add_invite("inv-1", "hostd", 2e9, False)
    stores, hub, node = _hub_and_node(tmp_path, vhost_uri, registrars)
    stores[0].add_invite("inv-2", "hoste", 2e9, False)
    stores[0].revoke_invite("inv-1")
    stores[1].add_host("hostd", "hostd")
    stores[1].use_invite("inv-1")
    hub.replica.push(hub.channel)
    node.replica.push(node.channel)  # neither has processed the other's announcement yet
    assert hub.replica.version == node.replica.version == 2
    for side in (hub, node):
        side.connection.process_data_events(time_limit=0.5)
        side.replica.sync(side.channel)
    for side in (hub, node):
        side.hear(3)
        side.replica.sync(side.channel)
    expected = (["hostd"], [("inv-1", "used"), ("inv-2", "open")])
    assert _records(stores[0]) == _records(stores[1]) == expected
    assert hub.replica.version == node.replica.version == 3
    assert not hub.replica.changed() and not node.replica.changed()


def test_changes_never_published_before_a_restart_are_merged_at_the_next_start(tmp_path, vhost_uri, registrars):
    """The hub machine wrote an invite and died before publishing it; a node's registrar
    granted meanwhile. The hub's next start merges the newer copy with the invite, which it
    recognises as unpublished from the copy it kept on disk."""
    kept = tmp_path / "hub.db.copy"
    hub_store = HubStore(tmp_path / "hub.db")
    first = Registrar(vhost_uri, StateReplica(hub_store.db, base_file=kept))
    registrars.append(first)
    first.replica.start(first.channel, pause=0)
    assert kept.stat().st_mode & 0o777 == 0o600
    node_store = HubStore(tmp_path / "node.db")
    node = Registrar(vhost_uri, StateReplica(node_store.db, origin=False))
    registrars.append(node)
    node.replica.start(node.channel)
    hub_store.add_invite("inv-late", "hostf", 2e9, False)  # written, never published: the machine dies
    first.connection.close()
    registrars.remove(first)
    node_store.add_host("hostb", "hostb")
    node.replica.push(node.channel)  # version 2, without the invite
    again = Registrar(vhost_uri, StateReplica(HubStore(tmp_path / "hub.db").db, base_file=kept))
    registrars.append(again)
    assert again.replica.changed()  # told apart from the kept copy
    again.replica.start(again.channel, pause=0)
    again.replica.sync(again.channel)
    assert again.replica.version == 3 and _records(hub_store) == (["hostb"], [("inv-late", "open")])
    node.hear(3)
    node.replica.sync(node.channel)
    assert _records(node_store) == (["hostb"], [("inv-late", "open")])
    restarted = StateReplica(HubStore(tmp_path / "hub.db").db, base_file=kept)
    assert not restarted.changed()  # everything published: a plain load at the next start


def test_a_copy_built_on_a_rival_is_merged_on_that_rival(tmp_path, vhost_uri, registrars):
    """Both publish version 2, then the node publishes version 3 on its own version 2 before
    hearing the hub's. The hub merges the node's 2 as a rival, then the node's 3 on the node's
    2 (the copy it names as its parent), not on the hub's own 2, which would undo the hub's
    change; in the end both hold all three changes."""
    stores, hub, node = _hub_and_node(tmp_path, vhost_uri, registrars)
    stores[0].add_invite("inv-h", "hostg", 2e9, False)
    hub.replica.push(hub.channel)
    stores[1].add_host("hostb", "hostb")
    node.replica.push(node.channel)
    stores[1].add_host("hostc", "hostc")
    node.replica.push(node.channel)  # version 3, before it processed the hub's version 2
    hub.hear(3)
    hub.replica.sync(hub.channel)
    expected = (["hostb", "hostc"], [("inv-h", "open")])
    assert _records(stores[0]) == expected
    for _ in range(3):
        for side in (node, hub):
            side.connection.process_data_events(time_limit=0.3)
            side.replica.sync(side.channel)
    assert _records(stores[1]) == _records(stores[0]) == expected
    assert hub.replica.version == node.replica.version
