"""The hub registrar's decisions, fed requests directly, against a real HubStore and a real
RabbitMQ node with the management plugin (one per module)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pika
import pika.exceptions
import pytest

from bridgecli import gids
from bridgecli.errors import Conflict
from bridgecli.hub import limits
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.invite import ENROL_USER_PREFIX
from bridgecli.hub.layout import LOCAL_USER
from bridgecli.hub.rabbitadmin import ManagementRefused, RabbitAdmin
from bridgecli.hub.registrar import ENROL_USER_GRACE, Registrar, check_host_tag
from bridgecli.rabbitnode import LocalNode
from bridgecli.sanitize import is_inert

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


def test_legacy_claim_bind_conflict_release(registrar, store, node):
    gid = str(uuid.uuid4())  # a legacy gid: recorded for its host before gids carried a tag
    store.claim("claim-a", [(gid, "a")])
    password = _join(registrar, "claim-a")
    _join(registrar, "claim-b")
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

        # released, the gid stays claim-a's for good: another host cannot take it over
        _refused(_claim(registrar, "claim-b", gid), "conflict", "belongs to host", "claim-a")
        assert _claim(registrar, "claim-a", gid)["ok"]  # its own host may have it back
        connection.channel().queue_declare(inbox, passive=True)
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
    for listed in (None, gid, [gid, 5]):
        _refused(registrar.handle({"op": "release", "gids": listed}, "hostile-a"), "invalid")
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
    store.claim("recon-a", [(gid, "a")])  # a legacy gid, recorded by an earlier hub
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


# --- the tag rule ------------------------------------------------------------------------
#: two host ids whose gid tags are equal (found by search: tags are 32 bits)
TWIN_A, TWIN_B = "tag30762", "tag126852"


def test_the_twins_share_a_tag():
    assert TWIN_A != TWIN_B and gids.host_tag(TWIN_A) == gids.host_tag(TWIN_B)


def test_own_tagged_gids_need_no_claim_and_others_are_refused(store, admin, clock):
    recording = Recording(admin)
    registrar = Registrar(store, recording, "hub-test", HUB_HOST, clock=clock)
    _join(registrar, "tag-a")
    _join(registrar, "tag-b")
    assert registrar.store.revoke_host("tag-b")
    _join(registrar, "tag-c")
    recording.calls.clear()

    own = gids.mint("tag-a")
    assert _claim(registrar, "tag-a", own, own) == {"ok": True, "host": "tag-a", "gids": [own, own]}
    assert store.owner(own) is None and store.claimants([own]) == {}  # nothing recorded
    assert recording.calls == []  # and no grant: the tag pattern grants it

    for other in ("tag-c", "tag-b", HUB_HOST):  # joined, revoked, the hub machine
        _refused(_claim(registrar, "tag-a", own, gids.mint(other)), "denied", "tag of host", other)
    _refused(_claim(registrar, "tag-a", str(uuid.uuid4())), "denied", "no record")
    assert "upgrade bridge" in _claim(registrar, "tag-a", str(uuid.uuid4()))["hint"]
    assert recording.calls == []
    assert store.gids_of("tag-a") == []


def test_enrol_refuses_a_host_id_with_a_taken_tag(store, admin, clock):
    registrar = Registrar(store, admin, "hub-test", TWIN_A, clock=clock)
    _refused(_enrol(registrar, _invite(store, TWIN_B), TWIN_B), "conflict", "same gid tag", TWIN_A)
    _refused(_enrol(registrar, _invite(store, TWIN_A), TWIN_A), "conflict", "same gid tag")  # the hub itself
    assert store.host(TWIN_B) is None and store.host(TWIN_A) is None

    other = Registrar(store, admin, "hub-test", HUB_HOST, clock=clock)
    _join(other, TWIN_A)
    answer = _enrol(other, _invite(store, TWIN_B), TWIN_B)
    _refused(answer, "conflict", "same gid tag", TWIN_A)
    assert "another host id" in answer["hint"]
    with pytest.raises(Conflict):
        check_host_tag(store, TWIN_B, HUB_HOST)  # what `bridge hub invite` calls
    check_host_tag(store, TWIN_A, HUB_HOST)  # its own tag, re-invited: fine
    assert store.revoke_host(TWIN_A)
    check_host_tag(store, TWIN_B, HUB_HOST)  # a revoked host's tag is free again


# --- limits ------------------------------------------------------------------------------
def test_claim_limits_name_the_limit(registrar, store):
    _join(registrar, "limit-a")
    own = gids.mint("limit-a")
    answer = registrar.handle({"op": "claim", "entities": [{"gid": own, "label": "x" * 65}]}, "limit-a")
    _refused(answer, "limit", str(limits.MAX_LABEL))
    many = [{"gid": gids.mint("limit-a"), "label": "a"} for _ in range(limits.MAX_GIDS_PER_CLAIM + 1)]
    _refused(registrar.handle({"op": "claim", "entities": many}, "limit-a"), "limit", "1000")
    _refused(registrar.handle({"op": "release", "gids": [e["gid"] for e in many]}, "limit-a"), "limit", "1000")
    assert registrar.handle({"op": "claim", "entities": many[:1000]}, "limit-a")["ok"]

    legacy = [{"gid": str(uuid.uuid4()), "label": "h"} for _ in range(limits.MAX_LEGACY_GIDS + 1)]
    batches = [legacy[i : i + 1000] for i in range(0, len(legacy), 1000)]
    for batch in batches[:-1]:
        assert registrar.handle({"op": "claim", "entities": batch}, LOCAL_USER)["ok"]
    _refused(registrar.handle({"op": "claim", "entities": batches[-1]}, LOCAL_USER), "limit", "2000")
    assert len(store.gids_of(HUB_HOST)) == limits.MAX_LEGACY_GIDS


def test_labels_are_stored_inert(registrar, store):
    _join(registrar, "label-a")
    gid = str(uuid.uuid4())
    store.claim("label-a", [(gid, "old")])
    label = "\x1b]0;pwned\x07\r\nx\x9b2J"
    assert registrar.handle({"op": "claim", "entities": [{"gid": gid, "label": label}]}, "label-a")["ok"]
    [(_, stored)] = store.gids_of("label-a")
    assert is_inert(stored) and "\n" not in stored and "pwned" in stored


def test_bodies_that_cannot_be_parsed_are_refused(registrar):
    _join(registrar, "body-a")
    bodies = [
        b"[" * 100_000,
        b'{"op": "claim", "entities": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        b" " * (limits.MAX_BODY + 1) + b"{}",
        b"\xff\xfe{}",
        b'{"op": "claim", "entities": [{"gid": NaN}]}',
        b"9" * 5000,
        b"",
        b"null",
        b'"claim"',
        b'{"op": "enrol", "host": "body-a", "password": "' + b"p" * 32 + b'", "time": 1e999}',
    ]
    for body in bodies:
        answer = registrar.handle_body(body, "body-a")
        assert answer["ok"] is False and answer["kind"] in ("invalid", "denied"), (body[:40], answer)
    _refused(registrar.handle_body(b"{}", None), "denied")
    _refused(registrar.handle_body(b"{}", 7), "denied")


def test_rate_limit_per_user(store, admin, clock):
    limiter = limits.RateLimiter(rate=2, burst=3, clock=clock)
    registrar = Registrar(store, admin, "hub-test", HUB_HOST, clock=clock, limiter=limiter)
    _join(registrar, "rate-a")
    _join(registrar, "rate-b")
    body = json.dumps({"op": "claim", "entities": [{"gid": gids.mint("rate-a"), "label": "a"}]}).encode()
    assert [registrar.handle_body(body, "rate-a")["ok"] for _ in range(3)] == [True] * 3
    answer = registrar.handle_body(body, "rate-a")
    _refused(answer, "rate_limited", "rate-a")
    assert answer["retryAfter"] == 0.5 and "wait 0.5 s" in answer["hint"]
    other = json.dumps({"op": "claim", "entities": [{"gid": gids.mint("rate-b")}]}).encode()
    assert registrar.handle_body(other, "rate-b")["ok"]  # another host is not slowed down
    hub = json.dumps({"op": "claim", "entities": [{"gid": gids.mint(HUB_HOST)}]}).encode()
    assert all(registrar.handle_body(hub, LOCAL_USER)["ok"] for _ in range(10))  # nor the hub
    clock.now += 0.5
    assert registrar.handle_body(body, "rate-a")["ok"]
    _refused(registrar.handle_body(body, "rate-a"), "rate_limited")


# --- grants that fail --------------------------------------------------------------------
def test_a_failed_grant_rolls_the_release_back(registrar, store, admin):
    gid = str(uuid.uuid4())
    store.claim("fail-a", [(gid, "a")])
    _join(registrar, "fail-a")
    admin.delete_user("fail-a")  # the broker now refuses every grant of fail-a
    answer = registrar.handle({"op": "release", "gids": [gid]}, "fail-a")
    _refused(answer, "error", "vhost_or_user_not_found")
    assert store.owner(gid) == "fail-a"


class FailingGrants(Recording):
    """The real admin, except that setting ``user``'s permissions fails as the broker would."""

    def __init__(self, admin: RabbitAdmin, user: str) -> None:
        super().__init__(admin)
        self.user = user

    def set_permissions(self, user: str, configure: str, write: str, read: str) -> None:
        if user == self.user:
            raise ManagementRefused("the broker's management API refused", status=503)
        self.admin.set_permissions(user, configure, write, read)


def test_a_failed_grant_rolls_the_join_back(store, admin, clock, node):
    registrar = Registrar(store, FailingGrants(admin, "fail-b"), "hub-test", HUB_HOST, clock=clock)
    invite_id = _invite(store, "fail-b")
    password = uuid.uuid4().hex
    _refused(_enrol(registrar, invite_id, "fail-b", password), "error", "refused")
    assert store.host("fail-b") is None
    assert store.invite(invite_id).state(T0) == "open"  # the host may try again
    assert not admin.user_exists("fail-b")


def test_reconcile_goes_on_past_a_host_whose_grant_fails(store, admin, clock, node):
    good = Registrar(store, admin, "hub-test", HUB_HOST, clock=clock)
    _join(good, "recon-x")
    password = _join(good, "recon-y")
    admin.set_permissions("recon-y", "^$", "^$", "^$")
    Registrar(store, FailingGrants(admin, "recon-x"), "hub-test", HUB_HOST, clock=clock).reconcile()
    connection = _connect(node, "recon-y", password)
    try:
        connection.channel().queue_declare("control.recon-y", auto_delete=True)
    finally:
        connection.close()
