"""The hub's registrar: turns authenticated requests into broker grants, and invites into hosts.

The broker has checked each request's ``user_id`` against its connection, so ``user_id`` is
who asks: a joined host may re-claim and release its legacy gids (tagged gids need no grant,
:mod:`bridgecli.gids`); an invite's enrolment user may enrol its one host, once.
:class:`Registrar` holds the decisions and no I/O; :mod:`bridgecli.hub.registrar_loop` is its
pika shell, with the limits of :mod:`bridgecli.hub.limits`, run as
``python -m bridgecli.hub.registrar`` by ``bridge hub start``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any, Protocol

from bridgecli import gids
from bridgecli.errors import BridgeError, Conflict, ExitCode, MetricsAddressError, Rejected
from bridgecli.hub import invite as invite_mod
from bridgecli.hub import layout, limits, node_enrol, permissions
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.layout import MAX_CLOCK_SKEW
from bridgecli.hub.registrar_events import REQUEST_KINDS, RegistrarEvents, outcome_of
from bridgecli.hub.registrar_loop import QUEUE, ROUTING_KEY, serve

__all__ = ["QUEUE", "ROUTING_KEY", "Registrar", "RegistrarEvents", "apply_grants", "check_host_tag", "serve"]
logger = logging.getLogger("bridgecli.hub.registrar")
_GID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MIN_PASSWORD = 24
MAX_PASSWORD = 256
#: seconds an used invite's enrolment user lives on, so that its answer is read first
ENROL_USER_GRACE = 3.0


class Grants(Protocol):
    """What the registrar needs from the broker: users and their permissions."""

    def put_user(self, name: str, password: str, tags: str = "") -> None: ...
    def delete_user(self, name: str) -> bool: ...
    def set_permissions(self, user: str, configure: str, write: str, read: str) -> None: ...
    def set_topic_permissions(self, user: str, exchange: str, write: str, read: str) -> None: ...


def apply_grants(admin: Grants, host: str, user: str, legacy_gids: list[str]) -> None:
    """Set ``user``'s permissions to exactly what ``host`` needs: the names its tag and its
    id grant, and ``legacy_gids`` (recorded gids minted before gids carried a tag)."""
    perms = permissions.for_host(host, legacy_gids, registrar=True)
    admin.set_permissions(user, perms.configure, perms.write, perms.read)
    for exchange, write, read in perms.topics():
        admin.set_topic_permissions(user, exchange, write, read)


def check_host_tag(store: HubStore, host: str, hub_host: str) -> None:
    """Raise Conflict when ``host``'s gid tag is the hub host's or a joined host's: the two
    would be granted each other's gids. For ``bridge hub invite`` as well as enrolment."""
    other = host if host == hub_host else store.tag_clash(host, hub_host)
    if other is not None:
        raise Conflict(
            f"host id {host!r} has the same gid tag as host {other!r} on this hub",
            "choose another host id for the new host",
        )


def _refusal(kind: str, message: str, hint: str) -> dict[str, Any]:
    return {"ok": False, "kind": kind, "error": message, "hint": hint}


_KINDS: list[tuple[type[BridgeError], str]] = [(Conflict, "conflict"), (Rejected, "limit")]


class Registrar:
    """Answers registrar requests. ``hub_host`` is the hub machine's own host id, whose
    commands connect as ``local_user`` (default ``layout.LOCAL_USER``); its claims record
    ownership but need no grant. ``limiter`` bounds each broker user's request rate (the hub
    machine's is not bounded). ``events`` hears what it does (default: nothing does)."""

    def __init__(
        self,
        store: HubStore,
        admin: Grants,
        hub_id: str,
        hub_host: str,
        clock: Callable[[], float] = time.time,
        limiter: limits.RateLimiter | None = None,
        local_user: str | None = None,
        events: RegistrarEvents | None = None,
        cluster: bool = False,
    ) -> None:
        self.events = events or RegistrarEvents()
        self.local_user: str = layout.LOCAL_USER if local_user is None else local_user
        self.store = store
        self.admin = admin
        self.hub_id = hub_id
        self.hub_host = hub_host
        self.clock = clock
        self.limiter = limiter or limits.RateLimiter()
        #: (when, user): enrolment users to delete once their answer has been read
        self.pending_drops: list[tuple[float, str]] = []
        self._tags: dict[str, str] = {}
        #: a cluster hub: host enrolments learn every node's address
        self.cluster = cluster

    def handle_body(self, body: bytes, user_id: Any) -> dict[str, Any]:
        """One delivery's raw body → its answer: the sender's rate first (over it, nothing
        is parsed), then the body's size and syntax, then :meth:`handle`. Raises only what
        handling a well-formed request raised (a bug, a broken disk): serve dead-letters it.
        Each call is reported to :attr:`events` with its op and outcome."""
        kinds: list[str] = []
        try:
            answer = self._answer_body(body, user_id, kinds)
        except Exception:
            self.events.request((kinds or ["unknown"])[0], "failed")
            raise
        self.events.request((kinds or ["unknown"])[0], outcome_of(answer))
        return answer

    def _answer_body(self, body: bytes, user_id: Any, kinds: list[str]) -> dict[str, Any]:
        """:meth:`handle_body`'s answer; appends the request's kind to ``kinds`` once parsed."""
        if not isinstance(user_id, str) or not user_id:
            return _refusal("denied", "the request carries no user_id", "publish with user_id set")
        if user_id != self.local_user:
            wait = self.limiter.take(user_id)
            if wait:
                after = limits.retry_after(wait)
                return {
                    **_refusal(
                        "rate_limited",
                        f"broker user {user_id} sent more than {self.limiter.rate:g} requests/s "
                        f"(burst {self.limiter.burst})",
                        f"wait {after:g} s and retry",
                    ),
                    "retryAfter": after,
                }
        try:
            request = limits.parse_body(body)
        except limits.BadBody as exc:
            return _refusal("invalid", str(exc), "send one JSON object, as bridge does; upgrade bridge on this host")
        op = request.get("op") if isinstance(request, dict) else None
        kinds.append(op if op in REQUEST_KINDS else "unknown")
        return self.handle(request, user_id)

    def handle(self, request: Any, user_id: str | None) -> dict[str, Any]:
        """One parsed request → its answer. Bad input and broker refusals are answered as
        refusals; only a failure of the store itself (or a bug) raises."""
        if not user_id:
            return _refusal("denied", "the request carries no user_id", "publish with user_id set")
        if not isinstance(request, dict):
            return _refusal("invalid", "the request is not a JSON object", "upgrade bridge on this host")
        op = request.get("op")
        try:
            if op == "enrol":
                return self.enrol(request, user_id)
            if op == "enrol-node":
                return self.enrol_node(request, user_id)
            if op in ("claim", "release", "nodes"):
                host = self._host_of(user_id)
                if host is None:
                    return _refusal(
                        "denied",
                        f"broker user {user_id!r} is not a joined host",
                        "join this host with `bridge join INVITE`",
                    )
                if op == "nodes":  # a joined host learns nodes added after it joined
                    return {"ok": True, **(node_enrol.host_extra(self.store) if self.cluster else {})}
                if op == "claim":
                    return self.claim(host, user_id, request.get("entities"))
                return self.release(host, user_id, request.get("gids"))
        except BridgeError as exc:
            kind = next((k for cls, k in _KINDS if isinstance(exc, cls)), "error")
            return _refusal(kind, exc.message, exc.hint or "")
        return _refusal("invalid", f"unknown request {str(op)[:40]!r}", "upgrade bridge on this host")

    def _host_of(self, user: str) -> str | None:
        if user == self.local_user:
            return self.hub_host
        record = self.store.host_of_user(user)
        return record.host if record else None

    def _tag(self, host: str) -> str:
        tag = self._tags.get(host)
        if tag is None:
            tag = self._tags[host] = gids.host_tag(host)
        return tag

    def _other_tags(self, host: str) -> dict[str, str]:
        """tag → host, for every host but ``host`` the hub knows (itself, joined, revoked)."""
        others = [self.hub_host] + [r.host for r in self.store.hosts()]
        return {self._tag(o): o for o in others if o != host}

    def legacy_gids(self, host: str) -> list[str]:
        """``host``'s recorded gids that its tag does not already grant."""
        return [g for g, _ in self.store.gids_of(host) if not gids.minted_on(g, host)]

    def claim(self, host: str, user: str, entities: Any) -> dict[str, Any]:
        """Own ``entities``' gids: its own tagged ones need nothing; a legacy one only if the
        hub recorded it for ``host``; another host's tag or record is refused. All or nothing."""
        wanted = _entities(entities)
        if isinstance(wanted, dict):
            return wanted
        legacy = [(g, label) for g, label in wanted if not gids.minted_on(g, host)]
        tags = self._other_tags(host) if legacy else {}
        for gid, _ in legacy:
            other = tags.get(gid[: gids.TAG_HEX])
            if other is not None:
                return _refusal(
                    "denied", f"gid {gid} carries the tag of host {other}", "a host may claim only gids minted on it"
                )
        recorded = self.store.claimants([g for g, _ in legacy]) if legacy else {}
        for gid, _ in legacy:
            owner = recorded.get(gid)
            if owner is not None and owner != host:
                return _refusal(
                    "conflict",
                    f"gid {gid} belongs to host {owner}",
                    "a gid can only be served by the host that registered it",
                )
            if owner is None and user != self.local_user:
                return _refusal(
                    "denied",
                    f"gid {gid} does not carry this host's tag and the hub has no record of it",
                    "upgrade bridge on this host: it then mints gids that carry its tag",
                )
        if legacy:
            revived = self.store.claim(host, legacy, max_live=limits.MAX_LEGACY_GIDS)
            self._regrant(host, user, revived, lambda: self.store.release(host, revived))
            logger.info("granted %s to host %s", ", ".join(g for g, _ in legacy), host)
        return {"ok": True, "host": host, "gids": [g for g, _ in wanted]}

    def release(self, host: str, user: str, gids_: Any) -> dict[str, Any]:
        """Give up ``host``'s recorded gids among ``gids_`` (kept as tombstones)."""
        if not isinstance(gids_, list) or not all(isinstance(g, str) and _GID_RE.fullmatch(g) for g in gids_):
            return _refusal("invalid", "gids must be a list of gids", "upgrade bridge on this host")
        if len(gids_) > limits.MAX_GIDS_PER_CLAIM:
            return _too_many(len(gids_))
        released = self.store.release(host, gids_)
        self._regrant(host, user, released, lambda: self.store.unrelease(host, released))
        if released:
            logger.info("released %s from host %s", ", ".join(released), host)
        return {"ok": True, "host": host, "gids": gids_}

    def _regrant(self, host: str, user: str, changed: list[str], undo: Callable[[], Any]) -> None:
        """Grant ``host`` its recorded gids after ``changed`` changed; when the broker refuses,
        ``undo`` the store change (and restore the old grant, best effort) and raise."""
        if not changed or user == self.local_user:
            return
        try:
            apply_grants(self.admin, host, user, self.legacy_gids(host))
        except Exception:
            logger.warning("grants of host %s failed; the change is rolled back", host)
            undo()
            self._grant_quietly(host, user)
            raise
        self.events.grants_applied()

    def _grant_quietly(self, host: str, user: str) -> bool:
        try:
            apply_grants(self.admin, host, user, self.legacy_gids(host))
            self.events.grants_applied()
            return True
        except Exception as exc:  # logged; the next reconcile tries again
            logger.warning("could not set the grants of host %s: %s", host, exc)
            return False

    def _open_invite(self, request: dict[str, Any], user_id: str, kind: str) -> tuple[Any, dict[str, Any] | None]:
        """(the record of the open ``kind`` invite whose enrolment user is ``user_id``, None),
        or (None, the refusal): unknown, used, revoked, expired, another kind, clocks apart."""
        if not user_id.startswith(invite_mod.ENROL_USER_PREFIX):
            return None, _refusal("denied", "only an invite may enrol a host", "use `bridge join INVITE`")
        invite_id = user_id[len(invite_mod.ENROL_USER_PREFIX) :]
        record = self.store.invite(invite_id)
        now = self.clock()
        state = record.state(now) if record else "unknown"
        if record is None or state != "open":
            self.pending_drops.append((now + ENROL_USER_GRACE, user_id))
            return None, _refusal("invite", f"this invite is {state}", invite_mod.ASK_AGAIN)
        if record.kind != kind:
            use = "bridge join --node INVITE" if record.kind == "node" else "bridge join INVITE"
            return None, _refusal("invite", f"this is a {record.kind} invite", f"use `{use}`")
        their_time = request.get("time")
        if isinstance(their_time, bool) or not isinstance(their_time, (int, float)):
            return None, _refusal("invalid", "the request carries no time", "upgrade bridge on this host")
        if not abs(their_time - now) <= MAX_CLOCK_SKEW:  # NaN is no time either
            return None, {
                **_refusal(
                    "clock",
                    f"this host's clock is {their_time - now:+.0f}s off the hub's",
                    "set the time right on both machines (e.g. enable NTP) and join again",
                ),
                "hubTime": now,
            }
        return record, None

    def enrol_node(self, request: dict[str, Any], user_id: str) -> dict[str, Any]:
        """Exchange a node invite for the cluster's secrets (:mod:`bridgecli.hub.node_enrol`). Works once."""
        record, refusal = self._open_invite(request, user_id, "node")
        if refusal is not None:
            return refusal
        if not self.store.use_invite(record.invite_id):
            return _refusal("invite", "this invite is used", invite_mod.ASK_AGAIN)
        try:
            answer = node_enrol.node_answer(self.store, record, self.clock())
        except Exception:
            self.store.unuse_invite(record.invite_id)
            raise
        self.pending_drops.append((self.clock() + ENROL_USER_GRACE, user_id))
        return answer

    def enrol(self, request: dict[str, Any], user_id: str) -> dict[str, Any]:
        """Exchange an invite (proved by logging in as its enrolment user) for a host user
        with the password the joining host chose. Works once."""
        record, refusal = self._open_invite(request, user_id, "host")
        if refusal is not None:
            return refusal
        invite_id, now = record.invite_id, self.clock()
        host, password = request.get("host"), request.get("password")
        if host != record.host:
            return _refusal(
                "invite",
                f"this invite is for host {record.host!r}, not {str(host)[:64]!r}",
                f"join with host id {record.host}",
            )
        if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
            return _refusal("invalid", "the new credential is too short or too long", "upgrade bridge on this host")
        check_host_tag(self.store, host, self.hub_host)
        existing = self.store.host(host)
        if existing and existing.revoked is None and not record.replace:
            return _refusal(
                "conflict",
                f"host {host!r} has already joined this hub",
                f"on the hub: `bridge hub invite {host} --replace` (or revoke it first)",
            )
        if not self.store.use_invite(invite_id):
            return _refusal("invite", "this invite is used", invite_mod.ASK_AGAIN)
        user = host
        try:
            self.admin.put_user(user, password)
            self.store.add_host(host, user)
            apply_grants(self.admin, host, user, self.legacy_gids(host))
        except Exception:
            logger.warning("joining host %s failed; rolled back, the invite stays open", host)
            self.store.restore_host(host, existing)
            self.store.unuse_invite(invite_id)
            if existing is None or existing.revoked is not None:
                self._drop_user_quietly(user)
            else:
                self._grant_quietly(host, user)
            raise
        self.events.grants_applied()
        self.events.enrolled()
        self.events.hosts_known(sum(1 for h in self.store.hosts() if h.revoked is None))
        # deleting a user closes its connections at once: give the answer time to arrive
        self.pending_drops.append((self.clock() + ENROL_USER_GRACE, user_id))
        logger.info("host %s joined (invite %s)", host, invite_id)
        extra = node_enrol.host_extra(self.store) if self.cluster else {}
        return {
            "ok": True,
            "hub": self.hub_id,
            "host": host,
            "user": user,
            "hubTime": now,
            "hubHost": self.hub_host,
            **extra,
        }

    def drop_due(self) -> None:
        """Delete the enrolment users whose grace period has passed."""
        now = self.clock()
        due = [user for when, user in self.pending_drops if when <= now]
        self.pending_drops = [(w, u) for w, u in self.pending_drops if w > now]
        for user in due:
            self._drop_user_quietly(user)

    def _drop_user_quietly(self, user: str) -> None:
        try:
            self.admin.delete_user(user)
        except BridgeError as exc:
            logger.warning("could not delete broker user %s: %s", user, exc)

    def reconcile(self) -> None:
        """Make the broker match the records: grants of joined hosts, no users of revoked
        hosts, no enrolment users of invites that can no longer be used. One host the broker
        refuses is logged and skipped: the others still get theirs."""
        now = self.clock()
        known = 0
        for host in self.store.hosts():
            if host.revoked is None:
                known += 1
                self._grant_quietly(host.host, host.user)
            else:
                self._drop_user_quietly(host.user)
        self.events.hosts_known(known)
        for record in self.store.invites():
            if record.state(now) != "open":
                self._drop_user_quietly(invite_mod.ENROL_USER_PREFIX + record.invite_id)


def _too_many(count: int) -> dict[str, Any]:
    return _refusal(
        "limit",
        f"the request names {count} gids; the limit is {limits.MAX_GIDS_PER_CLAIM}",
        "claim them in several requests",
    )


def _entities(entities: Any) -> list[tuple[str, str | None]] | dict[str, Any]:
    """The (gid, label) pairs of a claim, or the refusal saying what is wrong with it."""
    if not isinstance(entities, list):
        return _refusal("invalid", "entities must be a list", "upgrade bridge on this host")
    if len(entities) > limits.MAX_GIDS_PER_CLAIM:
        return _too_many(len(entities))
    wanted: list[tuple[str, str | None]] = []
    for item in entities:
        gid = item.get("gid") if isinstance(item, dict) else None
        if not isinstance(gid, str) or not _GID_RE.fullmatch(gid):
            shown = str(gid)[:40] if isinstance(gid, str) else type(gid).__name__
            return _refusal("invalid", f"not a gid: {shown!r}", "gids are lowercase UUIDs")
        label = item.get("label") if isinstance(item, dict) else None
        if label is not None and not isinstance(label, str):
            return _refusal("invalid", f"the label of {gid} is not a string", "upgrade bridge on this host")
        if label is not None and len(label) > limits.MAX_LABEL:
            return _refusal(
                "limit",
                f"the label of {gid} has {len(label)} characters; the limit is {limits.MAX_LABEL}",
                "register the entity under a shorter label",
            )
        wanted.append((gid, label))
    return wanted


def main() -> None:
    """Entry point of the registrar process (started by ``bridge hub start``)."""
    import signal
    import threading

    from bridgecli import config
    from bridgecli.hub import hub_relay, node_registrar
    from bridgecli.hub.rabbitadmin import RabbitAdmin
    from bridgecli.hub.state_replica import StateReplica

    logging.basicConfig(level=logging.INFO, format="%(asctime)s registrar %(levelname)s %(message)s")
    logging.getLogger("pika").setLevel(logging.WARNING)
    role = node_registrar.role()
    if role is None:
        raise SystemExit("registrar: no hub settings or broker state; start it with `bridge hub start`")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # the node's admin, on loopback, for the management API and the queue alike: the one
    # user that may change users and permissions
    admin = RabbitAdmin(role.management_port, role.admin_user, role.admin_password)
    cfg = None
    try:
        cfg = config.load(allow_unknown=True) if role.on_hub else None
    except BridgeError as exc:  # a broken bridge.toml: the registrar still serves
        logger.warning("roster relay and metrics not started: %s", exc)
    server = None
    events: RegistrarEvents | None = None
    if cfg is not None and cfg.values["hub.metrics"]:
        from bridgecli.hub import registrar_metrics

        try:
            events, server = registrar_metrics.start(cfg.values["hub.metrics"], logger)
        except MetricsAddressError as exc:  # `bridge hub start` reads the exit code
            logger.error("%s", exc.message)
            raise SystemExit(ExitCode.METRICS_ADDRESS) from None
    store = HubStore(role.db_path)
    registrar = Registrar(
        store, admin, role.hub_id, role.hub_host, local_user=role.hub_host, events=events, cluster=role.cluster
    )
    # the hub's roster relay, named after the hub, as its own broker user (hub_relay)
    if cfg is not None:
        try:
            hub_relay.start(admin, role.hub_id, role.amqp_port, cfg, stop)
        except BridgeError as exc:
            logger.warning("roster relay not started: %s", exc)
    replica = (
        StateReplica(store.db, origin=role.on_hub, base_file=store.path.with_name(store.path.name + ".copy"))
        if role.cluster
        else None
    )
    try:
        serve(
            registrar,
            role.amqp_uri,
            stop,
            replica=replica,
            name=role.connection_name,
            node_requests=role.cluster and role.on_hub,
        )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
