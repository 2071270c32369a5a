"""The hub registrar's decisions, fed requests directly, against a real HubStore and a real
RabbitMQ node with the management plugin (one per module)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pika
import pika.exceptions
import pytest

from bridgecli.hub.invite import ENROL_USER_PREFIX
from bridgecli.hub.layout import LOCAL_USER
from bridgecli.hub.rabbitadmin import RabbitAdmin
from bridgecli.hub.registrar import ENROL_USER_GRACE, Registrar
from bridgecli.hub.store import HubStore
from bridgecli.rabbitnode import LocalNode

HUB_HOST = "hubhost"
T0 = 1_800_000_000.0


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path) -> Iterator[HubStore]:
    store = HubStore(tmp_path / "hub.db")
    yield store
    store.close()


@pytest.fixture
def registrar(store, admin, clock) -> Registrar:
    return Registrar(store, admin, "hub-test", HUB_HOST, clock=clock)


def _connect(node: LocalNode, user: str, password: str) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(f"amqp://{user}:{password}@127.0.0.1:{node.port}/"))


def _invite(store: HubStore, host: str, *, replace: bool = False, expires: float = T0 + 3600) -> str:
    invite_id = uuid.uuid4().hex[:12]
    store.add_invite(invite_id, host, expires, replace=replace)
    return invite_id


def _enrol(
    registrar: Registrar, invite_id: str, host: str, password: str | None = None, at: float | None = None
) -> dict:
    request = {
        "op": "enrol",
        "host": host,
        "password": password or "p" * 32,
        "time": registrar.clock() if at is None else at,
    }
    return registrar.handle(request, ENROL_USER_PREFIX + invite_id)


def _join(registrar: Registrar, host: str, password: str | None = None) -> str:
    """Join ``host`` through a fresh invite; its password."""
    password = password or uuid.uuid4().hex
    answer = _enrol(registrar, _invite(registrar.store, host), host, password)
    assert answer["ok"], answer
    return password


def _claim(registrar: Registrar, user: str, *gids: str) -> dict:
    return registrar.handle({"op": "claim", "entities": [{"gid": g, "label": "a"} for g in gids]}, user)


def _refused(answer: dict, kind: str, *words: str) -> None:
    assert answer["ok"] is False, answer
    assert answer["kind"] == kind, answer
    for word in words:
        assert word in answer["error"], answer


def _declare_refused(channel, queue: str) -> None:
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
        channel.queue_declare(queue)
    assert refused.value.reply_code == 403


def test_enrol_grants_own_queues_only_and_drops_the_enrol_user(registrar, store, admin, node, clock):
    invite_id = _invite(store, "enrol-a")
    enrol_user = ENROL_USER_PREFIX + invite_id
    admin.put_user(enrol_user, "one-time-secret")
    password = "x" * 32

    answer = registrar.handle({"op": "enrol", "host": "enrol-a", "password": password, "time": T0}, enrol_user)
    assert answer == {
        "ok": True,
        "hub": "hub-test",
        "host": "enrol-a",
        "user": "enrol-a",
        "hubTime": T0,
        "hubHost": HUB_HOST,
    }
    assert store.host("enrol-a").user == "enrol-a"
    assert store.invite(invite_id).state(T0) == "used"

    connection = _connect(node, "enrol-a", password)
    try:
        channel = connection.channel()
        channel.queue_declare("control.enrol-a", auto_delete=True)
        _declare_refused(channel, "control.other")
    finally:
        connection.close()

    assert [user for _, user in registrar.pending_drops] == [enrol_user]
    registrar.drop_due()  # the answer has not been read yet: keep it
    assert admin.user_exists(enrol_user)
    clock.now = T0 + ENROL_USER_GRACE + 1
    registrar.drop_due()
    assert registrar.pending_drops == []
    assert not admin.user_exists(enrol_user)

    # the same invite again
    _refused(_enrol(registrar, invite_id, "enrol-a"), "invite", "used")


def test_expired_invite(registrar, store, clock):
    expired = _invite(store, "enrol-b", expires=T0 + 60)
    clock.now = T0 + 61
    _refused(_enrol(registrar, expired, "enrol-b"), "invite", "expired")
    assert store.host("enrol-b") is None
    assert [user for _, user in registrar.pending_drops] == [ENROL_USER_PREFIX + expired]


def test_clock_skew_leaves_the_invite_open(registrar, store):
    invite_id = _invite(store, "enrol-c")
    drops = list(registrar.pending_drops)
    for skew in (1000, -1000):
        answer = _enrol(registrar, invite_id, "enrol-c", at=T0 + skew)
        _refused(answer, "clock")
        assert answer["hubTime"] == T0
    assert store.invite(invite_id).state(T0) == "open"
    assert registrar.pending_drops == drops  # the enrol user stays: the host may try again
    assert store.host("enrol-c") is None
    assert _enrol(registrar, invite_id, "enrol-c", at=T0 + 200)["ok"]  # within the allowed skew


def test_rejoin_needs_a_replace_invite(registrar, store, node):
    old = _join(registrar, "enrol-d")
    plain = _invite(store, "enrol-d")
    _refused(_enrol(registrar, plain, "enrol-d", "n" * 32), "conflict", "already joined")
    assert store.invite(plain).state(T0) == "open"

    new = uuid.uuid4().hex
    assert _enrol(registrar, _invite(store, "enrol-d", replace=True), "enrol-d", new)["ok"]
    _connect(node, "enrol-d", new).close()
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        _connect(node, "enrol-d", old)


def test_claim_bind_conflict_release(registrar, store, node):
    password = _join(registrar, "claim-a")
    _join(registrar, "claim-b")
    gid = str(uuid.uuid4())
    inbox = f"agent.{gid}.inbox"
    guest = pika.BlockingConnection(pika.URLParameters(node.uri))
    try:
        guest.channel().exchange_declare("bridge.msg", "topic", durable=True)
    finally:
        guest.close()

    assert _claim(registrar, "claim-a", gid) == {"ok": True, "host": "claim-a", "gids": [gid]}
    assert store.owner(gid) == "claim-a"
    _refused(_claim(registrar, "claim-b", gid), "conflict", "belongs to host", "claim-a")
    assert store.owner(gid) == "claim-a"

    connection = _connect(node, "claim-a", password)
    try:
        channel = connection.channel()
        channel.queue_declare(inbox)
        channel.queue_bind(inbox, "bridge.msg", routing_key=gid)
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            connection.channel().queue_bind(inbox, "bridge.msg", routing_key=str(uuid.uuid4()))
        assert refused.value.reply_code == 403

        assert registrar.handle({"op": "release", "gids": [gid]}, "claim-a") == {
            "ok": True,
            "host": "claim-a",
            "gids": [gid],
        }
        assert store.owner(gid) is None
        _declare_refused(connection.channel(), inbox)
    finally:
        connection.close()


class Recording:
    """The real admin, with a record of the calls made through it."""

    def __init__(self, admin: RabbitAdmin) -> None:
        self.admin = admin
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        self.calls.append(name)
        return getattr(self.admin, name)


def test_hub_machine_claims_record_ownership_only(store, admin, clock, node):
    recording = Recording(admin)
    registrar = Registrar(store, recording, "hub-test", HUB_HOST, clock=clock)
    gid = str(uuid.uuid4())
    assert _claim(registrar, LOCAL_USER, gid) == {"ok": True, "host": HUB_HOST, "gids": [gid]}
    assert store.owner(gid) == HUB_HOST
    assert registrar.handle({"op": "release", "gids": [gid]}, LOCAL_USER)["ok"]
    assert store.owner(gid) is None
    assert recording.calls == []
    guest = pika.BlockingConnection(pika.URLParameters(node.uri))
    try:
        guest.channel().queue_declare("", exclusive=True)  # guest keeps its full rights
    finally:
        guest.close()


def test_hostile_input_never_raises(registrar, store):
    _join(registrar, "hostile-a")
    gid = str(uuid.uuid4())
    _refused(registrar.handle({"op": "claim", "entities": [{"gid": gid}]}, None), "denied")
    _refused(registrar.handle({"op": "claim", "entities": [{"gid": gid}]}, ""), "denied")
    for request in ([{"op": "claim"}], "claim", None, 42, {}, {"op": "grant"}, {"op": ["claim"]}, {"op": {"x": 1}}):
        _refused(registrar.handle(request, "hostile-a"), "invalid")
    for entities in (
        None,
        "x",
        {"gid": gid},
        [gid],
        [{"gid": 5}],
        [{"gid": gid.upper()}],
        [{"gid": gid + "0"}],
        [{"gid": "../" + gid}],
        [{"gid": gid}, {"label": "no gid"}],
    ):
        _refused(registrar.handle({"op": "claim", "entities": entities}, "hostile-a"), "invalid")
    for gids in (None, gid, [gid, 5]):
        _refused(registrar.handle({"op": "release", "gids": gids}, "hostile-a"), "invalid")
    assert store.gids_of("hostile-a") == []  # all or nothing

    _refused(_claim(registrar, "nobody", gid), "denied", "not a joined host")
    _refused(_claim(registrar, ENROL_USER_PREFIX + "0123456789ab", gid), "denied")
    _refused(registrar.handle({"op": "enrol", "host": "hostile-a", "password": "p" * 32}, "hostile-a"), "denied")
    _refused(registrar.handle({"op": "enrol", "host": HUB_HOST, "password": "p" * 32}, LOCAL_USER), "denied")

    invite_id = _invite(store, "hostile-b")
    _refused(_enrol(registrar, "ffffffffffff", "hostile-b"), "invite", "unknown")
    _refused(_enrol(registrar, invite_id, "hostile-c"), "invite", "hostile-b")
    for password in ("short", 12345, None, ["p" * 32]):
        request = {"op": "enrol", "host": "hostile-b", "password": password, "time": T0}
        _refused(registrar.handle(request, ENROL_USER_PREFIX + invite_id), "invalid")
    assert store.invite(invite_id).state(T0) == "open"
    assert store.host("hostile-b") is None


def test_gid_with_trailing_newline_is_invalid(registrar, store):
    _join(registrar, "hostile-d")
    gid = str(uuid.uuid4()) + "\n"
    _refused(_claim(registrar, "hostile-d", gid), "invalid")
    assert store.owner(gid) is None


def test_reconcile_restores_grants_and_removes_revoked(registrar, store, admin, node, clock):
    password = _join(registrar, "recon-a")
    gid = str(uuid.uuid4())
    assert _claim(registrar, "recon-a", gid)["ok"]
    admin.set_permissions("recon-a", "^$", "^$", "^$")
    connection = _connect(node, "recon-a", password)
    try:
        _declare_refused(connection.channel(), "control.recon-a")
        registrar.reconcile()
        channel = connection.channel()
        channel.queue_declare("control.recon-a", auto_delete=True)
        channel.queue_declare(f"agent.{gid}.inbox", auto_delete=True)
    finally:
        connection.close()

    expired = _invite(store, "recon-b", expires=T0 + 10)
    admin.put_user(ENROL_USER_PREFIX + expired, "secret")
    assert store.revoke_host("recon-a")
    clock.now = T0 + 11
    registrar.reconcile()
    assert not admin.user_exists("recon-a")
    assert not admin.user_exists(ENROL_USER_PREFIX + expired)
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        _connect(node, "recon-a", password)
    _refused(_claim(registrar, "recon-a", gid), "denied")
    assert store.owner(gid) == "recon-a"  # a revoked host's gids stay its own
    registrar.reconcile()  # nothing left to delete: still fine
