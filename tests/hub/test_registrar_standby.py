"""Two registrars of a cluster hub on one real node: one answers, the other keeps a copy of
the records and answers once the first is gone, with every change the first made."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator

import pika
import pika.exceptions
import pytest

from bridgecli.hub.claims import NODE_ROUTING_KEY, ROUTING_KEY
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.rabbitadmin import RabbitAdmin
from bridgecli.hub.registrar import Registrar, serve
from bridgecli.hub.registrar_loop import NODE_QUEUE
from bridgecli.hub.state_replica import STATE_QUEUE, StateReplica
from bridgecli.rabbitnode import LocalNode


class Running:
    """One registrar serving on a thread (which opens its database ``path``: SQLite objects
    stay in their thread); ``replica`` once it is made."""

    def __init__(self, node: LocalNode, admin: RabbitAdmin, path, origin: bool) -> None:
        """``origin``: the hub machine's registrar (it alone also serves node enrolments)."""
        self.path = path
        self.replica: StateReplica | None = None
        self.stop = threading.Event()
        user = node.admin_credentials[0]

        def run() -> None:
            store = HubStore(path)
            self.replica = StateReplica(store.db, origin=origin)
            registrar = Registrar(store, admin, "hub", "hub", local_user=user, cluster=True)
            serve(registrar, node.admin_uri, self.stop, replica=self.replica, node_requests=origin)

        self.thread = threading.Thread(target=run)
        self.thread.start()

    def version(self) -> int:
        return self.replica.version if self.replica is not None else 0

    def owner(self, gid: str) -> str | None:
        return HubStore(self.path).owner(gid)

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(10)


def _wait(predicate, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _ask(node: LocalNode, request: dict, key: str = ROUTING_KEY, timeout: float = 15.0) -> dict | None:
    """``request`` as the hub machine's user under routing ``key``; its answer, or None."""
    connection = pika.BlockingConnection(pika.URLParameters(node.admin_uri))
    try:
        channel = connection.channel()
        answers: list[dict] = []
        channel.basic_consume("amq.rabbitmq.reply-to", lambda c, m, p, b: answers.append(json.loads(b)), auto_ack=True)
        channel.basic_publish(
            "bridge.registrar",
            key,
            json.dumps(request).encode(),
            pika.BasicProperties(
                reply_to="amq.rabbitmq.reply-to", user_id=node.admin_credentials[0], expiration="5000"
            ),
        )
        deadline = time.monotonic() + timeout
        while not answers and time.monotonic() < deadline:
            connection.process_data_events(time_limit=0.1)
        return answers[0] if answers else None
    finally:
        connection.close()


def _claim(node: LocalNode, gid: str) -> dict:
    """A claim of ``gid`` as the hub machine's user (recorded, no grant); its answer."""
    answer = _ask(node, {"op": "claim", "entities": [{"gid": gid, "label": "x"}]})
    assert answer is not None, "no registrar answered"
    return answer


@pytest.fixture
def fresh_queues(node) -> Iterator[None]:
    """No ``bridge.registrar`` (another test's may be classic) nor records, before and after."""

    def drop() -> None:
        connection = pika.BlockingConnection(pika.URLParameters(node.admin_uri))
        try:
            channel = connection.channel()
            for queue in ("bridge.registrar", NODE_QUEUE, STATE_QUEUE):
                channel.queue_delete(queue)
        finally:
            connection.close()

    drop()
    yield
    drop()


def test_the_standby_registrar_takes_over_with_the_records(node, admin, tmp_path, fresh_queues):
    first = Running(node, admin, tmp_path / "hub.db", origin=True)
    _wait(lambda: first.version() >= 1, "the hub's registrar published its records")
    standby = Running(node, admin, tmp_path / "node.db", origin=False)
    _wait(lambda: standby.version() >= 1, "the node's registrar loaded them")
    try:
        before, after = str(uuid.uuid4()), str(uuid.uuid4())
        assert _claim(node, before)["ok"]
        _wait(lambda: standby.version() >= 2, "the claim copied to the standby")
        assert standby.owner(before) == "hub"
        first.halt()  # its connection closes: the broker activates the standby
        began = time.monotonic()
        assert _claim(node, after)["ok"]
        print(f"the standby answered {time.monotonic() - began:.2f}s after the first stopped")
        assert standby.owner(before) == "hub" and standby.owner(after) == "hub"
        # node enrolments go to the hub machine's registrar alone: none while it is away
        assert _ask(node, {"op": "nodes"}, NODE_ROUTING_KEY, timeout=2.0) is None
        back = Running(node, admin, tmp_path / "hub.db", origin=True)  # the hub machine returns
        try:
            _wait(lambda: back.owner(after) == "hub", "the returning registrar loaded the newer records")
            # the standby stays the active one for claims; the hub's answers node requests
            assert (_ask(node, {"op": "nodes"}, NODE_ROUTING_KEY) or {}).get("ok") is True
        finally:
            back.halt()
    finally:
        first.halt()
        standby.halt()


def _exists(node: LocalNode, queue: str) -> bool:
    connection = pika.BlockingConnection(pika.URLParameters(node.admin_uri))
    try:
        connection.channel().queue_declare(queue, passive=True)
        return True
    except pika.exceptions.ChannelClosedByBroker as exc:
        assert exc.reply_code == 404
        return False
    finally:
        if connection.is_open:
            connection.close()


def test_a_node_registrar_never_declares_the_node_enrolment_queue(node, admin, tmp_path, fresh_queues):
    """The node enrolment queue lives on the hub machine's node: a node's registrar that
    declared it could not reconnect while that node is down."""
    standby = Running(node, admin, tmp_path / "node.db", origin=False)
    try:
        _wait(lambda: _exists(node, STATE_QUEUE), "the node's registrar declared the records' queue")
        assert not _exists(node, NODE_QUEUE)
    finally:
        standby.halt()
