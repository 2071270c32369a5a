"""The gateway daemon: the only AMQP client of its host.

The I/O thread (the one calling :meth:`Gateway.run`) steps the gateway's one loop, which serves
the consuming connection (consumers, acks, dead letters), the publish lane's connection and the
local socket; periodic tasks run between its steps. The roster listener, one worker per blocking
entity, the local API's workers and the control threads never touch it; they hand work over
through :meth:`Gateway.after_step` / :meth:`Gateway.call_after_step`. Threads, ack discipline and the host
protocols collaborators see the gateway through: docs/architecture.md ("Gateway threads").
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pika
import pika.exceptions
import tenacity

from bridgecli import __version__
from bridgecli.amqp import connection as amqp_conn
from bridgecli.amqp import topology
from bridgecli.amqp.publisher import Publisher
from bridgecli.amqp.stepped import SteppedConnection, Stepper
from bridgecli.config import Config
from bridgecli.envelope import Envelope
from bridgecli.gateway import archive_writer, deadletter, identity, iocalls, registration, tracking
from bridgecli.gateway import log as glog
from bridgecli.gateway.backends import Backends
from bridgecli.gateway.burst import Burst
from bridgecli.gateway.elsewhere import Elsewhere
from bridgecli.gateway.entity_worker import Delivery
from bridgecli.gateway.events import NO_EVENTS, GatewayEvents
from bridgecli.gateway.inboxes import Consumer, Inboxes
from bridgecli.gateway.intake import Intake
from bridgecli.gateway.memberships import Memberships
from bridgecli.gateway.periodic import Periodic
from bridgecli.gateway.publishing import PublishLane
from bridgecli.gateway.reconnect import retry_until_stopped
from bridgecli.gateway.waiters import Waiters
from bridgecli.hoststate.entities import Registry, open_registry
from bridgecli.hoststate.store import Store, open_store
from bridgecli.hub.claims import claimer_for
from bridgecli.interfaces import Delivered, DeliveryBackend, Entity

if TYPE_CHECKING:
    from bridgecli.roster import RosterView

logger = logging.getLogger("bridgecli.gateway")
T = TypeVar("T")
#: how long the broker may take to open a channel of the consuming connection (seconds)
OPEN_TIMEOUT = 30.0


class Service(Protocol):
    """Something served on the gateway's loop for the whole run (the local API's socket)."""

    def start(self) -> None:
        """Begin serving (on the run thread, which owns the loop by then)."""

    def stop(self) -> None:
        """Stop serving (first thing when the gateway stops)."""


class Gateway:
    """One host's gateway. ``run()`` blocks until :meth:`stop` (or SIGINT/SIGTERM)."""

    def __init__(
        self,
        config: Config,
        *,
        plugins: Any = None,
        registry: Registry | None = None,
        store: Store | None = None,
        events: GatewayEvents = NO_EVENTS,
    ) -> None:
        from bridgecli import plugins as plugin_mod

        self.config = config
        self.host = config.host_id
        #: what this gateway reports as it works (counted by ``--metrics``)
        self.events = events
        self.plugins = plugins or plugin_mod.get()
        self.registry = registry or open_registry()
        self.store = store or open_store(config)
        self.store.checkpoint_in_background()
        self.max_attempts: int = config.values["messaging.max_attempts"]
        self.prefetch: int = config.values["messaging.prefetch"]
        self.queue_type: str = config.values["messaging.inbox_queue_type"]
        self.max_content: int = config.values["messaging.max_content_bytes"]
        self.connection: SteppedConnection | None = None
        self.channel: Any = None
        self.publisher: Publisher | None = None
        self.generation = 0
        self.backends = Backends(config, self.host, self.plugins, self.store)
        #: channel memberships: the registry's record, the broker's bindings, the roster's view
        self.memberships = Memberships(self.registry, self.call_after_step, lambda: self.connection, self._announce)
        #: each local entity's inbox consumer and worker
        self.inboxes = Inboxes(self, self.memberships.rebind)
        #: local calls blocked on a message (API threads register, the I/O thread hands over)
        self.waiters = Waiters(self.store)
        self.should_stop = threading.Event()
        self.connected = threading.Event()
        self.started = time.time()
        #: roster heartbeats, expiry, retries: run between two steps of the loop
        self.periodic = Periodic()
        self.on_entity_added: list[Callable[[Entity], None]] = []
        self.on_entity_removed: list[Callable[[Entity, str], None]] = []
        self.on_connect_hooks: list[Callable[[], None]] = []
        self.on_stop_hooks: list[Callable[[], None]] = []
        #: served on the loop while the gateway runs (:meth:`add_service`)
        self.services: list[Service] = []
        #: the one I/O loop of the run thread: the consuming connection, the publish lane's
        #: connection and the local socket are all served on it
        self.stepper = Stepper()
        #: every confirmed publish of a local sender (a connection of its own)
        self.lane = PublishLane(config, self.host, self.stepper, on_sent=events.sent)
        #: the open burst of inline deliveries and its hand-offs to waiters (I/O thread only)
        self.burst = Burst(self.store, self.waiters, self.should_stop)
        #: deliveries read in this turn of the loop, not handled yet (:meth:`on_message`)
        self._arrived: list[tuple[Entity, int, Any, Any, bytes]] = []
        #: what the I/O thread does with each delivery from a local inbox
        self.intake = Intake(self, config.values, self.store, self.burst, self.inboxes, self.backends, self.registry)
        #: the fleet's roster view, once presence is wired in (:meth:`use_roster`)
        self.roster: RosterView | None = None
        #: monotonic time by which the roster has heard every live gateway at least once
        self.roster_complete_at = 0.0
        #: extra lines of ``bridge status`` by name (:meth:`add_status`)
        self.status_extras: dict[str, Callable[[], Any]] = {}
        #: the hub's registrar, when this host's broker grants come from one (else None)
        self.grants = claimer_for(config)
        #: queues of ours consumed by another client (a clone of this host?)
        self.elsewhere = Elsewhere(stale_grace=2 * float(config.values["broker.heartbeat"]) + 60.0)
        self.add_periodic(0.5, self._retry_elsewhere)
        #: receipts to senders' hosts and from recipients' hosts, and hooks' activity
        self.tracking = tracking.build(self, self.lane)
        #: the archive of what local entities send and receive (bridge history), written off the loop
        self.history = archive_writer.build(self)

    def use_roster(self, view: RosterView) -> None:
        """Resolve targets and verify senders against ``view`` (presence calls this once)."""
        self.roster = view

    def roster_heard(self, within: float) -> None:
        """The roster (re)started listening: it hears every live gateway within ``within`` s."""
        self.roster_complete_at = max(self.roster_complete_at, time.monotonic() + within)

    def add_status(self, name: str, line: Callable[[], Any]) -> None:
        """Show ``line()`` under ``name`` in ``bridge status``."""
        self.status_extras[name] = line

    def add_service(self, service: Service) -> None:
        """Serve ``service`` on the loop while the gateway runs (whoever starts the gateway
        adds its local API this way: the daemon does not know what serves it)."""
        self.services.append(service)

    # --- lifecycle ----------------------------------------------------------------------

    def run(self) -> None:
        """Serve until stopped: connect with capped, jittered backoff; declare; consume;
        on a broker blip re-declare and re-attach everything."""
        self._install_signal_handlers()
        self.stepper.bind()  # this thread runs the loop, which serves the local API, connected or not
        for service in self.services:
            service.start()
        recovered = self.store.recover_taken()
        if recovered:  # handed to clients that never confirmed before the last gateway died
            glog.event(logger, "held again: messages no client confirmed", count=recovered)
        glog.event(logger, "gateway started", host=self.host, version=__version__)
        try:
            while not self.should_stop.is_set():
                try:
                    self._connect_with_backoff()
                except tenacity.RetryError:
                    break
                if self.should_stop.is_set():
                    break
                try:
                    self.consume()
                except amqp_conn.CONNECTION_ERRORS + (pika.exceptions.AMQPError,) as exc:
                    glog.event(logger, "broker connection lost", logging.WARNING, error=f"{type(exc).__name__}: {exc}")
                    self._on_connection_lost()
        finally:
            self._shutdown()

    def stop(self) -> None:
        """Ask the loop to finish (thread-safe; signal handlers call this)."""
        self.should_stop.set()

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop())

    def _connect_with_backoff(self) -> None:
        retry_until_stopped(self._connect, self.should_stop, "consumer", pause=self._pause)

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` (or until stopped) while the loop keeps serving the local API and
        the publish lane."""
        deadline = time.monotonic() + seconds
        while not self.should_stop.is_set() and (left := deadline - time.monotonic()) > 0:
            self.stepper.step(min(left, 0.2))
            self.lane.tend()

    def _connect(self) -> None:
        if identity.reread(self.config.values):
            glog.event(logger, "sender check settings changed", mode=self.config.values["security.sender_check"])
        connection = SteppedConnection(self.config, name=f"bridge-gateway-{self.host}", stepper=self.stepper)
        channel = topology.ensure_shared(
            lambda: connection.sync_channel(OPEN_TIMEOUT, "consumer"),
            self.queue_type,
            joined=bool(self.config.values.get("hub.id")),
        )
        topology.declare(channel, topology.delay_exchange(self.host))
        channel.basic_qos(prefetch_count=self.prefetch)
        pub_channel = connection.sync_channel(OPEN_TIMEOUT, "dead-letter")
        self.connection, self.channel = connection, channel
        self.elsewhere.reset()
        self.publisher = Publisher(pub_channel, user_id=amqp_conn.username(self.config))
        self.generation += 1
        self.burst.at_worker.clear()
        entities = self.registry.all()
        registration.reclaim(self.grants, entities)
        self.inboxes.attach_all(entities)
        for hook in self.on_connect_hooks:
            hook()
        interval = self.config.values["roster.interval"]
        self.roster_complete_at = time.monotonic() + interval * 1.5
        self.connected.set()
        self.lane.open()  # after the first connect: the topology is declared; it connects when tended
        glog.event(logger, "connected to broker", entities=len(self.consumers))

    def _on_connection_lost(self) -> None:
        self.connected.clear()
        self.elsewhere.connection_lost()
        self.burst.rollback()
        self.burst.at_worker.clear()
        self.generation += 1
        self.inboxes.forget_queued()
        try:
            if self.connection is not None and self.connection.is_open:
                self.connection.close()
        except Exception:  # closing a connection that already failed: it is dropped either way
            pass
        self.connection = self.channel = self.publisher = None
        self._pause(0.2)

    def _shutdown(self) -> None:
        glog.event(logger, "gateway stopping")
        for hook in self.on_stop_hooks:
            try:
                hook()
            except Exception as exc:
                glog.event(logger, "stop hook failed", logging.WARNING, error=str(exc))
        for service in reversed(self.services):
            service.stop()
        self.lane.stop()
        if self.connected.is_set():
            try:
                self.flush_batch()
            except Exception:
                self.burst.rollback()
            self.burst.sync_and_ack()
        workers = self.inboxes.workers()
        self.inboxes.forget_queued()  # not started yet: the broker redelivers them
        for worker in workers:
            worker.stop()  # the delivery in flight finishes and is acked below
        deadline = time.monotonic() + 10
        while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
            self._pump(0.05)
        self._pump(0)  # writes the last bursts' acks, queued after their syncs
        if self.connection is not None:
            try:
                self.connection.close()
            except Exception:  # closing a connection that already failed: it is dropped either way
                pass
        self.store.close()
        self.stepper.close()
        glog.event(logger, "gateway stopped")

    def _pump(self, seconds: float) -> None:
        if self.connection is not None and self.connection.is_open:
            try:
                self.connection.process_data_events(time_limit=seconds)
                return
            except Exception:  # lost while stopping: wait without it; the broker redelivers what was not acked
                pass
        time.sleep(seconds)

    # --- consuming ----------------------------------------------------------------------

    def consume(self, limit: float | None = None) -> None:
        """Run the I/O loop (steppable: ``limit`` seconds, or until stopped)."""
        end = None if limit is None else time.monotonic() + limit
        while not self.should_stop.is_set() and (end is None or time.monotonic() < end):
            assert self.connection is not None
            self.connection.process_data_events(time_limit=self.burst.ack_wait(0.2))
            if not self.channel.is_open:  # closed by the broker (a channel error): reconnect, never wedge
                raise pika.exceptions.ChannelClosed(0, "the consuming channel was closed by the broker")
            self.lane.tend()
            self.flush_batch()
            self.periodic.run_due()

    def add_periodic(self, interval: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the I/O thread every ``interval`` seconds (roster heartbeats …)."""
        self.periodic.add(interval, fn)

    def backend_for(self, entity: Entity) -> DeliveryBackend:
        """The delivery backend of ``entity`` (a BridgeError when its plugin is missing)."""
        return self.backends.for_entity(entity)

    @property
    def exclusive(self) -> bool:
        """Whether consumes carry the exclusive flag: classic queues only. Quorum queues ignore
        the flag; their inboxes are declared single-active-consumer instead, which the broker
        enforces and which hands the inbox over at once when a consumer's node dies."""
        return self.queue_type != "quorum"

    @property
    def consumers(self) -> dict[str, Consumer]:
        """Each local entity's inbox consumer, by gid (read by ``bridge status``)."""
        return self.inboxes.consumers

    def consuming(self, gid: str) -> bool:
        """Whether ``gid``'s inbox has a live consumer of this gateway."""
        consumer = self.consumers.get(gid)
        return consumer is not None and consumer.tag is not None

    def consumed_by_others(self) -> list[str]:
        """Queues of this host that another client consumes (:class:`.elsewhere.Elsewhere`)."""
        return list(self.elsewhere)

    def is_connected(self) -> bool:
        """Whether the consuming connection is up."""
        return self.connected.is_set()

    def extra_status(self) -> dict[str, Any]:
        """The extra lines of ``bridge status`` (:meth:`add_status`), by name."""
        return {name: line() for name, line in self.status_extras.items()}

    def consumed_elsewhere(self, queue: str, retry: Callable[[], None], what: str) -> bool:
        """True when another client consumes ``queue`` (I/O thread); ``retry`` then runs again
        later with backoff until the queue is free (see :class:`.elsewhere.Elsewhere`)."""
        assert self.connection is not None
        return self.elsewhere.check(self.connection, queue, retry, what)

    def _retry_elsewhere(self) -> None:
        if self.channel is not None:
            self.elsewhere.retry_due()

    def add_entity(self, **fields: Any) -> Entity:
        """Register an entity (:func:`.registration.register`) and start serving it: its inbox
        consumed, its presence announced (waits for the I/O thread)."""
        entity = registration.register(self.registry, self.plugins, self.config, grants=self.grants, **fields)
        try:
            self.call_after_step(lambda: self.attach_entity(entity))
        except Exception:
            self.registry.remove(entity.gid)
            raise
        return entity

    def remove_entity(self, entity: Entity) -> int:
        """Stop serving ``entity`` (:meth:`detach_entity`), forget it and give its grant back;
        how many of its messages were dead-lettered (waits for the I/O thread)."""
        moved: int = self.call_after_step(lambda: self.detach_entity(entity))
        self.registry.remove(entity.gid)
        registration.release(self.grants, entity)
        return moved

    def _announce(self, entity: Entity) -> None:
        for hook in self.on_entity_added:
            hook(entity)

    def attach_entity(self, entity: Entity) -> None:
        """Start serving a newly registered entity (I/O thread)."""
        if entity.gid in self.consumers:
            return
        if self.channel is not None:
            self.inboxes.attach(entity)
        glog.event(logger, "entity registered", entity=entity.label, gid=entity.gid, deliver=entity.deliver)
        self._announce(entity)

    def detach_entity(self, entity: Entity, reason: str = "unregistered") -> int:
        """Stop serving an entity; dead-letter whatever is still in its inbox, then delete
        the inbox. Returns how many messages were dead-lettered (I/O thread)."""
        self.elsewhere.forget(topology.inbox_name(entity.gid))
        moved = self.inboxes.detach(entity)
        for hook in self.on_entity_removed:
            hook(entity, reason)
        glog.event(logger, "entity unregistered", entity=entity.label, gid=entity.gid, dead_lettered=moved)
        return moved

    def on_message(self, entity: Entity, generation: int, method: Any, props: Any, body: bytes) -> None:
        """Take one delivery to ``entity``'s inbox, inside the loop. Every delivery the loop read
        with it is handled (:class:`.intake.Intake`) and committed as one burst in one later
        callback of the same turn of the loop, so that no other callback (a ``poll`` on this
        thread's store connection) ever meets the burst's transaction open."""
        self._arrived.append((entity, generation, method, props, body))
        if len(self._arrived) == 1:
            self.stepper.later(self._take_arrived)

    def _take_arrived(self) -> None:
        arrived, self._arrived = self._arrived, []
        try:
            for entity, generation, method, props, body in arrived:
                if generation == self.generation:  # else its channel is gone: the broker redelivers
                    self.intake.on_message(entity, generation, method, props, body)
            self.flush_batch()
        except amqp_conn.CONNECTION_ERRORS + (pika.exceptions.AMQPError,):
            self.burst.rollback()  # the connection's loss ends the step; the broker redelivers
        except Exception as exc:  # a bug, inside a loop callback: requeue the burst, keep serving
            count = self.burst.requeue(self.channel)
            glog.event(
                logger, "burst failed; requeued", logging.ERROR, count=count, error=f"{type(exc).__name__}: {exc}"
            )

    def flush_batch(self) -> None:
        """Commit, hand over, sync and ack the open burst (:meth:`.burst.Burst.flush`); log it."""
        batch = self.burst.flush(self.channel)
        for _, entity, envelope in batch:
            self.tracking.delivered(envelope, Delivered(how=self.backends.traits(entity).delivered_how))
            self.events.delivered(entity, envelope)
        self.history.received((entity.gid, envelope) for _, entity, envelope in batch)
        if len(batch) == 1:
            glog.delivered(logger, batch[0][1], batch[0][2])
        elif batch:  # one line per committed burst: a log line per message would cost more than the delivery
            glog.event(
                logger,
                "delivered",
                count=len(batch),
                entities=len({e.gid for _, e, _ in batch}),
                first=batch[0][2].msg_id,
                last=batch[-1][2].msg_id,
            )

    # --- delivering ---------------------------------------------------------------------

    def deliver_once(self, entity: Entity, backend: DeliveryBackend, envelope: Envelope) -> None:
        """Hand one message to the backend, write its dedup record, log it and wake its
        waiters (a worker thread's call; raises DeliveryError)."""
        outcome = self.backends.deliver(entity, backend, envelope)
        self.tracking.delivered(envelope, outcome)
        self.events.delivered(entity, envelope)
        self.history.received([(entity.gid, envelope)])
        glog.delivered(logger, entity, envelope)
        self.waiters.notify(envelope)

    def after_step(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the I/O thread after the loop's current step (from any thread; see
        :func:`.iocalls.after_step`)."""
        iocalls.after_step(self.connection, fn)

    def ack_from_worker(self, item: Delivery) -> None:
        """Ack a worker's delivery on the I/O thread, unless its channel has been replaced."""

        def ack() -> None:
            if item.generation == self.generation and self.channel is not None:
                self.burst.at_worker.discard(item.tag)
                self.channel.basic_ack(item.tag)

        self.after_step(ack)

    def dead_letter_from_worker(self, item: Delivery, reason: str, detail: str, attempts: int) -> None:
        """Dead-letter a worker's delivery on the I/O thread, unless its channel was replaced."""

        def move() -> None:
            if item.generation == self.generation:
                self.burst.at_worker.discard(item.tag)
                self.dead_letter(item.tag, item.properties, item.body, item.queue, reason, detail, attempts)

        self.after_step(move)

    def dead_letter(
        self, tag: int, props: Any, body: bytes, queue_name: str, reason: str, detail: str, attempts: int | None = None
    ) -> None:
        """Move one delivery to the DLQ with ``reason`` and ack it (I/O thread; called inside
        the loop, it waits for the next step, as the publish waits for its confirm)."""
        if self.stepper.in_step():
            assert self.connection is not None
            self.connection.after_step(lambda: self.dead_letter(tag, props, body, queue_name, reason, detail, attempts))
            return
        assert self.publisher is not None and self.channel is not None
        self.tracking.dead_lettered(body, getattr(props, "user_id", None), reason, detail)
        self.events.dead_lettered(queue_name, props, reason)
        deadletter.dead_letter(self.publisher, self.channel, tag, props, body, queue_name, reason, detail, attempts)

    # --- publishing ---------------------------------------------------------------------

    def submit(self, envelopes: list[Envelope], delay_ms: int | None, timeout: float) -> list[Future]:
        """Publish for a local sender, confirmed + mandatory, through the publish lane (from
        any thread but the I/O thread, which it never blocks); one confirm per envelope."""
        return self.lane.submit(envelopes, delay_ms, timeout)

    def publish_in_loop(self, envelopes: list[Envelope], delay_ms: int | None) -> list[Future]:
        """:meth:`submit` from inside the loop, without waiting (the lane must be connected)."""
        return self.lane.publish_in_loop(envelopes, delay_ms)

    def can_publish(self) -> bool:
        """Whether the publish lane is connected."""
        return self.lane.ready.is_set()

    def broker_server(self) -> dict[str, Any]:
        """The broker's product and version, as the publish lane's connection reported them."""
        return self.lane.server_info

    def resolve_target(self, target: str, force: bool = False, may_wait: bool = True) -> str:
        """A gid for ``target`` (gid, or label): local entities first, then the roster."""
        from bridgecli.resolve import resolve_target

        return self.once_roster_complete(
            lambda: resolve_target(target, registry=self.registry, roster=self.roster, force=force), may_wait
        )

    def once_roster_complete(self, lookup: Callable[[], T], may_wait: bool = True) -> T:
        """Run ``lookup`` (something that consults the roster); while it raises
        :class:`~bridgecli.errors.NotFound` and this gateway connected less than one heartbeat
        interval ago, retry: the view has not heard every host yet, so wait for it to fill
        before calling a target or host unknown (without ``may_wait``: raise
        :class:`~bridgecli.gateway.api.contract.WouldWait`)."""
        from bridgecli.errors import NotFound
        from bridgecli.gateway.api.contract import WouldWait

        first = time.monotonic()
        while True:
            try:
                return lookup()
            except NotFound:
                # fed by a relay, another host's new entity reaches us up to two relay periods late
                until = max(self.roster_complete_at, first + self.roster.relay.lag()) if self.roster else 0.0
                if time.monotonic() >= until:
                    raise
                if not may_wait:
                    raise WouldWait("the roster has not heard every host yet") from None
                time.sleep(0.1)

    # --- running work on the I/O thread -------------------------------------------------

    def call_after_step(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """Run ``fn`` on the I/O thread after the loop's current step and return its result
        (from any thread; on the I/O thread itself it runs at once, which must not be inside
        a loop callback)."""
        if self.stepper.on_loop_thread():
            return fn()
        result: T = iocalls.call_after_step(lambda: self.connection, self.connected, fn, timeout)
        return result

    def queue_depths(self) -> dict[str, int]:
        """Ready counts of each local inbox and of the DLQ (I/O thread)."""
        assert self.connection is not None
        return iocalls.message_counts(
            self.connection, [topology.inbox_name(g) for g in self.consumers] + [topology.DLQ]
        )
