"""The hub's registrar: turns authenticated claims into broker grants, and invites into hosts.

Requests arrive on the ``bridge.registrar`` queue. The broker has already checked each one's
``user_id`` against the connection's user, so ``user_id`` *is* who asks: a joined host's
user may claim gids (which become its inboxes and bindings), release them, and nothing
else; an invite's enrolment user may enrol its one host, once. :class:`Registrar` holds the
decisions and no I/O (the store and a grant applier are given to it); :func:`serve` is the
pika shell around it, run as ``python -m bridgecli.hub.registrar`` by ``bridge hub start``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any, Protocol

from bridgecli.errors import BridgeError, Conflict
from bridgecli.hub import invite as invite_mod
from bridgecli.hub import permissions
from bridgecli.hub.layout import LOCAL_USER, MAX_CLOCK_SKEW
from bridgecli.hub.store import HubStore

logger = logging.getLogger("bridgecli.hub.registrar")
QUEUE = permissions.REGISTRAR_EXCHANGE
ROUTING_KEY = "claim"
_GID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MIN_PASSWORD = 24
#: seconds an used invite's enrolment user lives on, so that its answer is read first
ENROL_USER_GRACE = 3.0


class Grants(Protocol):
    """What the registrar needs from the broker: users and their permissions."""

    def put_user(self, name: str, password: str, tags: str = "") -> None: ...
    def delete_user(self, name: str) -> bool: ...
    def set_permissions(self, user: str, configure: str, write: str, read: str) -> None: ...
    def set_topic_permissions(self, user: str, exchange: str, write: str, read: str) -> None: ...


def apply_grants(admin: Grants, host: str, user: str, gids: list[str], *, topics: bool = True) -> None:
    """Set ``user``'s permissions to exactly what ``host`` owning ``gids`` needs."""
    perms = permissions.for_host(host, gids, registrar=True)
    admin.set_permissions(user, perms.configure, perms.write, perms.read)
    admin.set_topic_permissions(user, "bridge.msg", perms.topic_msg_write, perms.topic_msg_read)
    if topics:
        admin.set_topic_permissions(user, "bridge.roster", perms.topic_roster_write, perms.topic_roster_read)


def _refusal(kind: str, message: str, hint: str) -> dict[str, Any]:
    return {"ok": False, "kind": kind, "error": message, "hint": hint}


class Registrar:
    """Answers registrar requests. ``hub_host`` is the hub machine's own host id, whose
    commands connect as :data:`LOCAL_USER`; its claims record ownership but need no grant."""

    def __init__(
        self, store: HubStore, admin: Grants, hub_id: str, hub_host: str, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.admin = admin
        self.hub_id = hub_id
        self.hub_host = hub_host
        self.clock = clock
        #: (when, user): enrolment users to delete once their answer has been read
        self.pending_drops: list[tuple[float, str]] = []

    def handle(self, request: Any, user_id: str | None) -> dict[str, Any]:
        """One request → its answer (never raises for bad input: a refusal says why)."""
        if not user_id:
            return _refusal("denied", "the request carries no user_id", "publish with user_id set")
        if not isinstance(request, dict):
            return _refusal("invalid", "the request is not a JSON object", "upgrade bridge on this host")
        op = request.get("op")
        try:
            if op == "enrol":
                return self.enrol(request, user_id)
            if op in ("claim", "release"):
                host = self._host_of(user_id)
                if host is None:
                    return _refusal(
                        "denied",
                        f"broker user {user_id!r} is not a joined host",
                        "join this host with `bridge join INVITE`",
                    )
                if op == "claim":
                    return self.claim(host, user_id, request.get("entities"))
                return self.release(host, user_id, request.get("gids"))
        except BridgeError as exc:
            return _refusal("conflict" if isinstance(exc, Conflict) else "error", exc.message, exc.hint or "")
        return _refusal("invalid", f"unknown request {op!r}", "upgrade bridge on this host")

    def _host_of(self, user: str) -> str | None:
        if user == LOCAL_USER:
            return self.hub_host
        record = self.store.host_of_user(user)
        return record.host if record else None

    def claim(self, host: str, user: str, entities: Any) -> dict[str, Any]:
        wanted: list[tuple[str, str | None]] = []
        for item in entities if isinstance(entities, list) else [None]:
            gid = item.get("gid") if isinstance(item, dict) else None
            if not isinstance(item, dict) or not isinstance(gid, str) or not _GID_RE.fullmatch(gid):
                return _refusal("invalid", f"not a gid: {gid!r}", "gids are lowercase UUIDs")
            label = item.get("label")
            wanted.append((gid, label if isinstance(label, str) else None))
        self.store.claim(host, wanted)
        if user != LOCAL_USER:
            apply_grants(self.admin, host, user, [g for g, _ in self.store.gids_of(host)], topics=False)
        logger.info("granted %s to host %s", ", ".join(g for g, _ in wanted), host)
        return {"ok": True, "host": host, "gids": [g for g, _ in wanted]}

    def release(self, host: str, user: str, gids: Any) -> dict[str, Any]:
        if not isinstance(gids, list) or not all(isinstance(g, str) for g in gids):
            return _refusal("invalid", "gids must be a list of strings", "upgrade bridge on this host")
        self.store.release(host, gids)
        if user != LOCAL_USER:
            apply_grants(self.admin, host, user, [g for g, _ in self.store.gids_of(host)], topics=False)
        logger.info("released %s from host %s", ", ".join(gids), host)
        return {"ok": True, "host": host, "gids": gids}

    def enrol(self, request: dict[str, Any], user_id: str) -> dict[str, Any]:
        """Exchange an invite (proved by logging in as its enrolment user) for a host user
        with the password the joining host chose. Works once."""
        if not user_id.startswith(invite_mod.ENROL_USER_PREFIX):
            return _refusal("denied", "only an invite may enrol a host", "use `bridge join INVITE`")
        invite_id = user_id[len(invite_mod.ENROL_USER_PREFIX) :]
        record = self.store.invite(invite_id)
        now = self.clock()
        state = record.state(now) if record else "unknown"
        if record is None or state != "open":
            self.pending_drops.append((now + ENROL_USER_GRACE, user_id))
            return _refusal("invite", f"this invite is {state}", invite_mod.ASK_AGAIN)
        their_time = request.get("time")
        if isinstance(their_time, (int, float)) and abs(their_time - now) > MAX_CLOCK_SKEW:
            return {
                **_refusal(
                    "clock",
                    f"this host's clock is {their_time - now:+.0f}s off the hub's",
                    "set the time right on both machines (e.g. enable NTP) and join again",
                ),
                "hubTime": now,
            }
        host, password = request.get("host"), request.get("password")
        if host != record.host:
            return _refusal(
                "invite", f"this invite is for host {record.host!r}, not {host!r}", f"join with host id {record.host}"
            )
        if not isinstance(password, str) or len(password) < MIN_PASSWORD:
            return _refusal("invalid", "the new credential is too short", "upgrade bridge on this host")
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
        self.admin.put_user(user, password)
        self.store.add_host(host, user)
        apply_grants(self.admin, host, user, [g for g, _ in self.store.gids_of(host)])
        # deleting a user closes its connections at once: give the answer time to arrive
        self.pending_drops.append((self.clock() + ENROL_USER_GRACE, user_id))
        logger.info("host %s joined (invite %s)", host, invite_id)
        return {"ok": True, "hub": self.hub_id, "host": host, "user": user, "hubTime": now, "hubHost": self.hub_host}

    def drop_due(self) -> None:
        """Delete the enrolment users whose grace period has passed."""
        now = self.clock()
        due = [user for when, user in self.pending_drops if when <= now]
        self.pending_drops = [(w, u) for w, u in self.pending_drops if w > now]
        for user in due:
            self._drop_enrol_user(user)

    def _drop_enrol_user(self, user: str) -> None:
        try:
            self.admin.delete_user(user)
        except BridgeError as exc:
            logger.warning("could not delete enrolment user %s: %s", user, exc)

    def reconcile(self) -> None:
        """Make the broker match the records: grants of joined hosts, no users of revoked
        hosts, no enrolment users of invites that can no longer be used."""
        now = self.clock()
        for host in self.store.hosts():
            if host.revoked is None:
                apply_grants(self.admin, host.host, host.user, [g for g, _ in self.store.gids_of(host.host)])
            else:
                self.admin.delete_user(host.user)
        for record in self.store.invites():
            if record.state(now) != "open":
                self.admin.delete_user(invite_mod.ENROL_USER_PREFIX + record.invite_id)


def serve(registrar: Registrar, uri: str, should_stop: Any, sweep_every: float = 60.0) -> None:
    """Consume the registrar queue as its only consumer and answer each request, until
    ``should_stop`` (an Event) is set; reconnects with capped, jittered backoff."""
    import pika
    import pika.exceptions
    import tenacity

    from bridgecli.amqp.connection import open_blocking

    def connect() -> Any:
        params = pika.URLParameters(uri)
        params.heartbeat = 30
        params.client_properties = {"connection_name": "bridge-hub-registrar", "product": "bridgecli"}
        return open_blocking(params)

    def on_request(channel: Any, method: Any, props: Any, body: bytes) -> None:
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        try:
            answer = registrar.handle(request, getattr(props, "user_id", None))
        except Exception as exc:  # a broker or disk failure: say so, keep serving
            logger.exception("request failed")
            answer = _refusal(
                "error",
                f"the registrar failed: {type(exc).__name__}: {exc}",
                "retry; if it persists, see the hub's registrar.log",
            )
        if props.reply_to:
            channel.basic_publish(
                "",
                props.reply_to,
                json.dumps(answer).encode(),
                pika.BasicProperties(correlation_id=props.correlation_id, content_type="application/json"),
            )
        channel.basic_ack(method.delivery_tag)

    retrying = tenacity.Retrying(
        wait=tenacity.wait_random_exponential(multiplier=0.5, max=10),
        retry=tenacity.retry_if_exception_type(Exception),
        stop=tenacity.stop_when_event_set(should_stop),
        sleep=lambda s: should_stop.wait(s),
    )
    while not should_stop.is_set():
        try:
            connection = retrying(connect)
        except tenacity.RetryError:
            return
        try:
            channel = connection.channel()
            channel.exchange_declare(QUEUE, "direct", durable=True)
            channel.queue_declare(QUEUE, durable=True)
            channel.queue_bind(QUEUE, QUEUE, routing_key=ROUTING_KEY)
            channel.basic_qos(prefetch_count=16)
            channel.basic_consume(QUEUE, lambda *a: on_request(*a), exclusive=True)
            registrar.reconcile()
            logger.info("registrar serving")
            last_sweep = time.monotonic()
            while not should_stop.is_set():
                connection.process_data_events(time_limit=0.5)
                registrar.drop_due()
                if time.monotonic() - last_sweep > sweep_every:
                    registrar.reconcile()
                    last_sweep = time.monotonic()
        except (pika.exceptions.AMQPError, OSError, BridgeError) as exc:
            logger.warning("registrar connection lost: %s", exc)
            should_stop.wait(0.5)
        finally:
            try:
                if connection.is_open:
                    connection.close()
            except (pika.exceptions.AMQPError, OSError):  # closing a lost connection: logged above
                pass


def main() -> None:
    """Entry point of the registrar process (started by ``bridge hub start``)."""
    import signal
    import threading

    from bridgecli import localbroker
    from bridgecli.hub import layout
    from bridgecli.hub.rabbitadmin import RabbitAdmin

    logging.basicConfig(level=logging.INFO, format="%(asctime)s registrar %(levelname)s %(message)s")
    logging.getLogger("pika").setLevel(logging.WARNING)
    settings = layout.load()
    info = localbroker.read_state()
    if settings is None or info is None:
        raise SystemExit("registrar: no hub settings or broker state; start it with `bridge hub start`")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # the node's admin, on loopback, for the management API and the queue alike: the one
    # user that may change users and permissions
    user, password = localbroker.admin_credentials()
    admin = RabbitAdmin(settings.management_port, user, password)
    registrar = Registrar(HubStore(layout.db_path()), admin, settings.hub_id, settings.host_id)
    serve(registrar, localbroker.admin_uri(info), stop)


if __name__ == "__main__":
    main()
