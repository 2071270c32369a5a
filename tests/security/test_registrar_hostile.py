"""A hostile joined host against a real registrar: ``serve`` runs in a thread on a real
RabbitMQ node, and the host publishes to ``bridge.registrar`` as its own broker user, the
way a probe against a real hub did. Nothing here is timed: each test waits (with a generous
bound) for answers and checks what they say, and what reached which queue."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pika
import pika.exceptions
import pytest

from bridgecli import config as config_mod
from bridgecli import gids
from bridgecli.errors import ExitCode, RateLimited
from bridgecli.hub.claims import GrantClaimer
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.invite import ENROL_USER_PREFIX
from bridgecli.hub.permissions import ENROL_PERMISSIONS
from bridgecli.hub.rabbitadmin import RabbitAdmin
from bridgecli.hub.registrar import Registrar, serve
from bridgecli.nodeprocess import stop_epmd_if_idle
from bridgecli.rabbitnode import LocalNode

HUB_HOST = "sechub"
DIRECT = "amq.rabbitmq.reply-to"
#: a bound on every wait for an answer; an answer that never comes fails the test
PATIENCE = 120.0


def _admin_credentials(node: LocalNode) -> tuple[str, str]:
    """The node's administrator (``guest`` on a node that has none of its own)."""
    return getattr(node, "admin_credentials", ("guest", "guest"))


def _admin_uri(node: LocalNode) -> str:
    return getattr(node, "admin_uri", node.uri)


@pytest.fixture(scope="module")
def node() -> Iterator[LocalNode]:
    base = Path(tempfile.mkdtemp(prefix="brsec", dir="/tmp"))
    node = LocalNode(base, management=True)
    try:
        node.start()
        RabbitAdmin(node.management_port, *_admin_credentials(node)).wait_ready(60)
        yield node
    finally:
        node.stop()
        shutil.rmtree(base, ignore_errors=True)
        stop_epmd_if_idle()


class Hub:
    """The registrar, served in a thread against the node, and the test's own view of hub.db
    (the serving thread opens its own connection, as the registrar process does)."""

    def __init__(self, node: LocalNode, db: Path, rate: tuple[float, int] | None = None) -> None:
        self.node = node
        self.db = db
        self.rate = rate
        self.admin = RabbitAdmin(node.management_port, *_admin_credentials(node))
        self.store = HubStore(db)
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="registrar", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + PATIENCE
        while self._consumers() < 1:  # serving: its queue has its one consumer
            assert time.monotonic() < deadline, "the registrar never consumed its queue"
            time.sleep(0.1)

    def _consumers(self) -> int:
        connection = pika.BlockingConnection(pika.URLParameters(_admin_uri(self.node)))
        try:
            return connection.channel().queue_declare("bridge.registrar", passive=True).method.consumer_count
        except pika.exceptions.ChannelClosedByBroker:
            return 0
        finally:
            if connection.is_open:
                connection.close()

    def _serve(self) -> None:
        store = HubStore(self.db)
        try:
            if self.rate:
                from bridgecli.hub.limits import RateLimiter

                registrar = Registrar(store, self.admin, "hub-sec", HUB_HOST, limiter=RateLimiter(*self.rate))
            else:
                registrar = Registrar(store, self.admin, "hub-sec", HUB_HOST)
            serve(registrar, _admin_uri(self.node), self.stop_event, sweep_every=3600)
        finally:
            store.close()

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(30)
            assert not self.thread.is_alive()

    def join(self, host: str) -> str:
        """Join ``host`` through a real invite and its enrolment user; its password."""
        invite_id = uuid.uuid4().hex[:12]
        self.store.add_invite(invite_id, host, time.time() + 600, replace=False)
        enrol_user, secret, password = ENROL_USER_PREFIX + invite_id, uuid.uuid4().hex, uuid.uuid4().hex
        self.admin.put_user(enrol_user, secret)
        self.admin.set_permissions(enrol_user, *ENROL_PERMISSIONS)
        with Client(self.node, enrol_user, secret) as client:
            answer = client.ask({"op": "enrol", "host": host, "password": password, "time": time.time()})
        assert answer["ok"], answer
        return password

    def client(self, host: str) -> Client:
        return Client(self.node, host, self.join(host))

    def depth(self, queue: str) -> int:
        connection = pika.BlockingConnection(pika.URLParameters(_admin_uri(self.node)))
        try:
            return connection.channel().queue_declare(queue, passive=True).method.message_count
        finally:
            connection.close()


class Client:
    """A broker user publishing raw bodies to the registrar, answers on direct reply-to."""

    def __init__(self, node: LocalNode, user: str, password: str) -> None:
        self.user = user
        self.connection = pika.BlockingConnection(
            pika.URLParameters(f"amqp://{user}:{password}@127.0.0.1:{node.port}/?heartbeat=0")
        )
        self.channel = self.connection.channel()
        self.answers: dict[str, list[dict[str, Any]]] = {}
        self.order: list[str] = []
        self.channel.basic_consume(DIRECT, self._on_answer, auto_ack=True)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        if self.connection.is_open:
            self.connection.close()

    def _on_answer(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        self.answers.setdefault(props.correlation_id, []).append(json.loads(body))
        self.order.append(props.correlation_id)

    def send(self, body: bytes | dict[str, Any], reply_to: str = DIRECT) -> str:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        correlation = str(uuid.uuid4())
        self.channel.basic_publish(
            "bridge.registrar",
            "claim",
            raw,
            pika.BasicProperties(reply_to=reply_to, correlation_id=correlation, user_id=self.user),
        )
        return correlation

    def wait(self, correlations: list[str]) -> list[dict[str, Any]]:
        """The first answer to each of ``correlations`` (fails when one never comes)."""
        deadline = time.monotonic() + PATIENCE
        while any(c not in self.answers for c in correlations):
            assert time.monotonic() < deadline, f"{sum(c not in self.answers for c in correlations)} unanswered"
            self.connection.process_data_events(time_limit=0.2)
        return [self.answers[c][0] for c in correlations]

    def ask(self, body: bytes | dict[str, Any]) -> dict[str, Any]:
        return self.wait([self.send(body)])[0]


@pytest.fixture
def hub(node, tmp_path) -> Iterator[Hub]:
    hub = Hub(node, tmp_path / "hub.db")
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()
        hub.store.close()


def _own_claim(host: str) -> dict[str, Any]:
    return {"op": "claim", "entities": [{"gid": gids.mint(host), "label": "ok"}]}


def _host() -> str:
    return f"sec-{uuid.uuid4().hex[:10]}"


def test_unparseable_bodies_are_refused_and_the_registrar_serves_on(hub):
    host = _host()
    with hub.client(host) as hostile:
        bodies = [
            b"[" * 100_000,
            b'{"op": "claim", "entities": ' + b"[" * 60_000 + b"}",
            b"{" * 10 + b" " * 200_000,
            b"\xff\xfe\x00{",
            b'{"op": "claim", "entities": [{"gid": NaN, "label": []}]}',
            b'{"op": "release", "gids": {"$gt": ""}}',
            b"12",
        ]
        answers = hostile.wait([hostile.send(body) for body in bodies])
        assert [a["ok"] for a in answers] == [False] * len(bodies), answers
        assert {a["kind"] for a in answers} <= {"invalid", "limit"}, answers
        assert hostile.ask(_own_claim(host))["ok"]  # still serving, and the queue is empty
    assert hub.depth("bridge.registrar") == 0


def test_a_burst_from_one_host_does_not_hold_up_the_others(hub):
    attacker, victim = _host(), _host()
    with hub.client(attacker) as hostile, hub.client(victim) as honest:
        flood = [
            hostile.send({"op": "claim", "entities": [{"gid": str(uuid.uuid4()), "label": "x"}]}) for _ in range(3000)
        ]
        mine = honest.send(_own_claim(victim))
        [answer] = honest.wait([mine])
        assert answer["ok"], answer
        answers = hostile.wait(flood)
    limited = [a for a in answers if a.get("kind") == "rate_limited"]
    # the registrar did the work of at most a burst and a trickle; the rest was turned away
    assert len(limited) >= 2000, {a.get("kind") for a in answers}
    assert all(a["retryAfter"] > 0 and "wait" in a["hint"] for a in limited)
    assert all(not a["ok"] for a in answers)  # untagged gids the hub never recorded
    assert hub.store.gids_of(attacker) == []


def test_an_answer_goes_only_to_direct_reply_to(hub, node):
    attacker, victim = _host(), _host()
    hub.join(victim)
    target = f"agent.{gids.mint(victim)}.inbox"
    guest = pika.BlockingConnection(pika.URLParameters(_admin_uri(node)))
    try:
        channel = guest.channel()
        for queue in (target, f"control.{victim}"):
            channel.queue_declare(queue, durable=True)
    finally:
        guest.close()
    with hub.client(attacker) as hostile:
        for reply_to in (target, f"control.{victim}", "amq.rabbitmq.reply-tox", ""):
            hostile.send(_own_claim(attacker), reply_to=reply_to)
        assert hostile.ask(_own_claim(attacker))["ok"]  # one consumer, in order: the others were seen
        assert len(hostile.answers) == 1
    assert hub.depth(target) == 0
    assert hub.depth(f"control.{victim}") == 0


def test_a_request_whose_handling_fails_is_dead_lettered_once(hub, node):
    host = _host()
    dead = f"sec.dead.{uuid.uuid4().hex[:8]}"
    guest = pika.BlockingConnection(pika.URLParameters(_admin_uri(node)))
    try:
        setup = guest.channel()
        setup.exchange_declare("bridge.dlx", "fanout", durable=True)
        setup.queue_declare(dead, durable=True)
        setup.queue_bind(dead, "bridge.dlx")
    finally:
        guest.close()
    legacy = str(uuid.uuid4())
    hub.store.claim(host, [(legacy, "old")])
    with hub.client(host) as client:
        db = sqlite3.connect(hub.db)
        db.execute("ALTER TABLE gids RENAME TO gids_away")  # the hub's disk fails under it
        poison = client.send({"op": "claim", "entities": [{"gid": legacy, "label": "old"}]})
        [answer] = client.wait([poison])
        assert answer["ok"] is False and answer["kind"] == "error", answer

        guest = pika.BlockingConnection(pika.URLParameters(_admin_uri(node)))
        try:
            channel = guest.channel()
            deadline = time.monotonic() + PATIENCE
            while (got := channel.basic_get(dead, auto_ack=True))[0] is None:
                assert time.monotonic() < deadline, "nothing was dead-lettered"
                guest.sleep(0.1)
            _, props, body = got
            assert props.headers["x-bridge-reason"] == "registrar_refused"
            assert "OperationalError" in props.headers["x-bridge-detail"]
            assert json.loads(body)["entities"][0]["gid"] == legacy
        finally:
            guest.close()

        db.execute("ALTER TABLE gids_away RENAME TO gids")  # repaired; the registrar restarts
        db.close()
        hub.stop()
        hub.start()
        assert client.ask(_own_claim(host))["ok"]
        assert client.answers[poison] == [answer]  # not redelivered, so not handled again
    assert hub.depth(dead) == 0
    assert hub.depth("bridge.registrar") == 0


def _claimer(node: LocalNode, host: str, password: str, timeout: float, port: int | None = None) -> GrantClaimer:
    values = {"broker.uri": f"amqp://{host}:{password}@127.0.0.1:{port or node.port}/", "hub.id": "hub-sec"}
    return GrantClaimer(config_mod.load({**values, "host.id": host}, env={}), timeout=timeout)


def test_the_claimer_skips_its_tagged_gids_and_waits_out_a_rate_limit(node, tmp_path, monkeypatch):
    monkeypatch.setenv("BRIDGE_CONFIG", str(tmp_path / "absent.toml"))
    host = _host()
    # a gid minted on this host needs no round trip, to claim or release it: no broker
    # listens on port 9 (discard), so any attempt would raise
    nowhere = _claimer(node, host, "unused", 1.0, port=9)
    nowhere.claim([SimpleNamespace(gid=gids.mint(host), label="a")])
    nowhere.release([gids.mint(host)])

    hub = Hub(node, tmp_path / "hub.db", rate=(0.2, 1))  # one request, then one each 5 s
    hub.start()
    try:
        legacy = [SimpleNamespace(gid=str(uuid.uuid4()), label=f"old{i}") for i in range(3)]
        hub.store.claim(host, [(e.gid, e.label) for e in legacy])
        password = hub.join(host)
        patient, hurried = _claimer(node, host, password, 30.0), _claimer(node, host, password, 2.0)
        try:
            patient.claim(legacy[:1])
            with pytest.raises(RateLimited) as limited:
                hurried.claim(legacy[1:2])  # 5 s do not fit in its 2 s: the refusal, at once
            assert "too many requests" in limited.value.message and "wait" in (limited.value.hint or "")
            assert limited.value.exit_code == ExitCode.RATE_LIMITED
            patient.claim(legacy[2:])  # refused first, then retried once after the wait
        finally:
            patient.close()
            hurried.close()
    finally:
        hub.stop()
        hub.store.close()
