"""The gateway daemon: the only AMQP client of its host (seed §2, §5, §6, §8).

Threading model (pika's ``BlockingConnection`` is not thread-safe):

* the **I/O thread** (the one calling :meth:`Gateway.run`) owns the consuming connection. It
  runs the consumers, acks, dead-letter publishes and the periodic tasks.
* the **publish lane** (:mod:`bridgecli.gateway.publishing`) owns a second connection and
  does every confirmed publish of a local sender, so waiting for a confirm never stops
  consuming. Nothing else touches pika.
* one **worker thread per entity** whose backend may block (tmux, herdr, exec). Workers
  deliver one message at a time (per-recipient FIFO) and hand the ack back to the I/O thread
  with ``add_callback_threadsafe`` — so a slow delivery never stalls heartbeats.
* **local API threads** (one per client connection) publish through the lane
  (:meth:`Gateway.publish`) and submit other AMQP work to the I/O thread through
  :meth:`Gateway.on_io`, waiting for its result.

Ack discipline: a delivery is acked only after its backend confirmed it *and* the dedup
record is written; a message that cannot be decoded or validated is dead-lettered (with the
reason in a header) and only then acked; after ``messaging.max_attempts`` failed deliveries
the message is dead-lettered too. Acks from a channel that has since been replaced are
dropped: the broker redelivers those messages and the dedup store absorbs the repeat.
"""

from __future__ import annotations

import hashlib
import logging
import signal
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import pika
import pika.exceptions
import tenacity

from bridgecli import __version__
from bridgecli import envelope as env_mod
from bridgecli.amqp import connection as amqp_conn
from bridgecli.amqp import topology
from bridgecli.amqp.publisher import Publisher
from bridgecli.config import Config
from bridgecli.envelope import Envelope, InvalidEnvelope
from bridgecli.errors import BridgeError, BrokerUnavailable, DeliveryError
from bridgecli.gateway import identity
from bridgecli.hub.claims import claimer_for
from bridgecli.gateway import log as glog
from bridgecli.hoststate.entities import Registry, open_registry
from bridgecli.gateway.deadletter import drain_to_dlq
from bridgecli.gateway.publishing import PublishLane
from bridgecli.gateway.reconnect import retry_until_stopped
from bridgecli.gateway.burst import Burst, Waiter
from bridgecli.hoststate.store import DELIVERED, Store, StoredMessage, open_store
from bridgecli.gateway.worker import Delivery, EntityWorker, drain_queue
from bridgecli.interfaces import BackendContext, DeliveryBackend, Entity

logger = logging.getLogger("bridgecli.gateway")
T = TypeVar("T")
#: most inline deliveries committed and acked together
BATCH_MAX = 256


@dataclass
class _Consumer:
    entity: Entity
    tag: str | None = None
    worker: EntityWorker | None = None
    ready: int = 0


@dataclass
class _Elsewhere:
    """A queue of ours that another client consumes: retried with backoff until it is free."""

    what: str
    retry: Callable[[], None]
    interval: float = 1.0
    next_at: float = 0.0


class Gateway:
    """One host's gateway. ``run()`` blocks until :meth:`stop` (or SIGINT/SIGTERM)."""

    def __init__(self, config: Config, *, plugins: Any = None, registry: Registry | None = None,
                 store: Store | None = None) -> None:
        from bridgecli import plugins as plugin_mod

        self.config = config
        self.host = config.host_id
        self.plugins = plugins or plugin_mod.get()
        self.registry = registry or open_registry()
        self.store = store or open_store(config)
        self.store.checkpoint_in_background()
        self.max_attempts: int = config.values["messaging.max_attempts"]
        self.prefetch: int = config.values["messaging.prefetch"]
        self.queue_type: str = config.values["messaging.inbox_queue_type"]
        self.max_content: int = config.values["messaging.max_content_bytes"]
        self.connection: pika.BlockingConnection | None = None
        self.channel: Any = None
        self.publisher: Publisher | None = None
        self.generation = 0
        self.consumers: dict[str, _Consumer] = {}
        self.backends: dict[str, DeliveryBackend] = {}
        self.waiters: list[Waiter] = []
        self.waiters_lock = threading.Lock()
        self.should_stop = threading.Event()
        self.connected = threading.Event()
        self.server_info: dict[str, Any] = {}
        self.started = time.time()
        self.periodic: list[tuple[float, Callable[[], None]]] = []  # (interval, fn)
        self._last_run: dict[int, float] = {}
        self.on_entity_added: list[Callable[[Entity], None]] = []
        self.on_entity_removed: list[Callable[[Entity, str], None]] = []
        self.on_connect_hooks: list[Callable[[], None]] = []
        self.on_stop_hooks: list[Callable[[], None]] = []
        self.api = None
        #: every confirmed publish of a local sender (a connection and thread of its own)
        self.lane = PublishLane(config, self.host)
        #: the open burst of inline deliveries and its hand-offs to waiters (I/O thread only)
        self.burst = Burst(self.store, self.waiters, self.waiters_lock, self.should_stop)
        #: delivery tags handed to worker threads and not yet acked (see _flush_batch)
        self._worker_tags: set[int] = set()
        self._identity_policy = identity.IdentityPolicy.from_config(config.values)
        #: monotonic time by which the roster has heard every live gateway at least once
        self.roster_complete_at = 0.0
        self.status_extras: dict[str, Callable[[], Any]] = {}
        #: the hub's registrar, when this host's broker grants come from one (else None)
        self.grants = claimer_for(config)
        #: queues of ours consumed by another client (a clone of this host?), by queue name
        self.elsewhere: dict[str, _Elsewhere] = {}
        self._probe: Any = None
        #: when this gateway last lost its connection: until the broker notices, the old
        #: connection's consumers still count (a cluster node that died, a dead TCP peer)
        self._lost_at: float | None = None
        self._stale_grace = 2 * float(config.values["broker.heartbeat"]) + 60.0
        self.add_periodic(0.5, self._retry_elsewhere)

    # --- lifecycle ----------------------------------------------------------------------

    def run(self) -> None:
        """Serve until stopped: connect with capped, jittered backoff; declare; consume;
        on a broker blip re-declare and re-attach everything."""
        from bridgecli.gateway.localapi import LocalApi

        self._install_signal_handlers()
        self.api = LocalApi(self)
        self.api.start()
        recovered = self.store.recover_taken()
        if recovered:  # handed to clients that never confirmed before the last gateway died
            glog.event(logger, "held again: messages no client confirmed", count=recovered)
        glog.event(logger, "gateway started", host=self.host, version=__version__,
                   socket=str(self.api.path))
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
                    glog.event(logger, "broker connection lost", logging.WARNING,
                               error=f"{type(exc).__name__}: {exc}")
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
        retry_until_stopped(self._connect, self.should_stop, "consumer")

    def _connect(self) -> None:
        connection = amqp_conn.connect(self.config, name=f"bridge-gateway-{self.host}")
        try:
            self.server_info = {k: (v.decode() if isinstance(v, bytes) else v)
                                for k, v in (connection._impl.server_properties or {}).items()
                                if k in ("product", "version", "cluster_name")}
        except Exception:
            self.server_info = {}
        channel = connection.channel()
        topology.declare(channel, *topology.SHARED_EXCHANGES, topology.dead_letter_queue(self.queue_type),
                         topology.DELAY_EXCHANGE)
        channel.basic_qos(prefetch_count=self.prefetch)
        pub_channel = connection.channel()
        username = connection._impl.params.credentials.username
        self.connection, self.channel = connection, channel
        self._probe, self.elsewhere = None, {}
        self.publisher = Publisher(pub_channel, user_id=username)
        self.generation += 1
        self._worker_tags = set()
        # keep each entity's worker thread across reconnects: a second worker for the same
        # entity would break per-recipient order (stale items are dropped by generation)
        previous, self.consumers = self.consumers, {}
        entities = self.registry.all()
        self._claim_grants(entities)
        for entity in entities:
            if entity.gid in previous:
                kept = previous.pop(entity.gid)
                kept.tag = None
                self.consumers[entity.gid] = kept
            self._attach(entity)
        for stale in previous.values():
            if stale.worker is not None:
                stale.worker.stop()
        for hook in self.on_connect_hooks:
            hook()
        interval = self.config.values["roster.interval"]
        self.roster_complete_at = time.monotonic() + interval * 1.5
        self.connected.set()
        if not self.lane.started:  # after the first connect: the topology is declared
            self.lane.start()
        glog.event(logger, "connected to broker", server=self.server_info.get("product"),
                   version=self.server_info.get("version"), entities=len(self.consumers))

    def _claim_grants(self, entities: list[Entity]) -> None:
        """Re-own every entity's gid at the hub before declaring inboxes (idempotent; covers
        entities registered while the hub was away). A refusal is logged, not fatal: the
        inboxes the broker already grants keep working."""
        if self.grants is None or not entities:
            return
        try:
            self.grants.claim(entities)
        except BridgeError as exc:
            glog.event(logger, "hub refused or did not answer a grant claim", logging.WARNING, error=str(exc))

    def _on_connection_lost(self) -> None:
        self.connected.clear()
        self._lost_at = time.monotonic()
        self.burst.rollback()
        self._worker_tags = set()
        self.generation += 1
        for consumer in self.consumers.values():
            if consumer.worker is not None:
                drain_queue(consumer.worker.items)
        try:
            if self.connection is not None and self.connection.is_open:
                self.connection.close()
        except Exception:
            pass
        self.connection = self.channel = self.publisher = None
        self.should_stop.wait(0.2)

    def _shutdown(self) -> None:
        glog.event(logger, "gateway stopping")
        for hook in self.on_stop_hooks:
            try:
                hook()
            except Exception as exc:
                glog.event(logger, "stop hook failed", logging.WARNING, error=str(exc))
        if self.api is not None:
            self.api.stop()
        self.lane.stop()
        if self.connected.is_set():
            try:
                self._flush_batch()
            except Exception:
                self.burst.rollback()
        workers = [c.worker for c in self.consumers.values() if c.worker is not None]
        for worker in workers:
            drain_queue(worker.items)  # not started yet: the broker redelivers them
            worker.stop()  # the delivery in flight finishes and is acked below
        deadline = time.monotonic() + 10
        while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
            self._pump(0.05)
        self._pump(0)  # writes the last bursts' acks, queued after their syncs
        if self.connection is not None:
            try:
                self.connection.close()
            except Exception:
                pass
        self.store.close()
        glog.event(logger, "gateway stopped")

    def _pump(self, seconds: float) -> None:
        if self.connection is not None and self.connection.is_open:
            try:
                self.connection.process_data_events(time_limit=seconds)
                return
            except Exception:
                pass
        time.sleep(seconds)

    # --- consuming ----------------------------------------------------------------------

    def consume(self, limit: float | None = None) -> None:
        """Run the I/O loop (steppable: ``limit`` seconds, or until stopped)."""
        end = None if limit is None else time.monotonic() + limit
        while not self.should_stop.is_set() and (end is None or time.monotonic() < end):
            assert self.connection is not None
            self.connection.process_data_events(time_limit=0.2)
            self._flush_batch()
            self._run_periodic()

    def add_periodic(self, interval: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the I/O thread every ``interval`` seconds (roster heartbeats …)."""
        self.periodic.append((interval, fn))

    def _run_periodic(self) -> None:
        now = time.monotonic()
        for index, (interval, fn) in enumerate(self.periodic):
            if now - self._last_run.get(index, 0.0) >= interval:
                self._last_run[index] = now
                try:
                    fn()
                except amqp_conn.CONNECTION_ERRORS:
                    raise
                except Exception as exc:
                    glog.event(logger, "periodic task failed", logging.WARNING, task=getattr(fn, "__name__", "?"),
                               error=f"{type(exc).__name__}: {exc}")

    def backend_for(self, entity: Entity) -> DeliveryBackend:
        if entity.backend not in self.backends:
            factory = self.plugins.provider("backends", entity.backend)
            backend = factory(BackendContext(config=self.config, state_dir=self.store.path.parent,
                                             host_id=self.host))
            if getattr(backend, "records_itself", False):
                # it writes the dedup record itself: through our store, so that its write
                # joins the batch transaction of the I/O thread
                backend.store = self.store
            self.backends[entity.backend] = backend
        return self.backends[entity.backend]

    def _attach(self, entity: Entity) -> None:
        """Declare the entity's inbox and start its manual-ack, exclusive consumer (unless
        another client consumes the inbox: then it is retried with backoff)."""
        assert self.channel is not None
        queue = topology.inbox_name(entity.gid)
        topology.declare(self.channel, topology.inbox_queue(entity.gid, self.queue_type, self.max_attempts))
        consumer = self.consumers.get(entity.gid) or _Consumer(entity)
        self.consumers[entity.gid] = consumer
        if self.consumed_elsewhere(queue, lambda: self._reattach(entity), f"entity {entity.label}"):
            return
        try:
            backend = self.backend_for(entity)
        except BridgeError as exc:
            glog.event(logger, "entity has no usable backend; not consuming", logging.ERROR,
                       entity=entity.label, error=str(exc))
            return
        if not getattr(backend, "inline", False) and consumer.worker is None:
            consumer.worker = EntityWorker(self, entity, backend)
            consumer.worker.start()
        generation = self.generation
        consumer.tag = self.channel.basic_consume(
            queue, lambda ch, method, props, body: self._on_message(entity, generation, method, props, body),
            exclusive=self.exclusive)

    @property
    def exclusive(self) -> bool:
        """Whether consumes carry the exclusive flag: classic queues only. Quorum queues ignore
        the flag; their inboxes are declared single-active-consumer instead, which the broker
        enforces and which hands the inbox over at once when a consumer's node dies."""
        return self.queue_type != "quorum"

    def _reattach(self, entity: Entity) -> None:
        if entity.gid in self.consumers and self.consumers[entity.gid].tag is None:
            self._attach(entity)

    def consumed_elsewhere(self, queue: str, retry: Callable[[], None], what: str) -> bool:
        """True when another client consumes ``queue`` (I/O thread). Then ``retry`` runs
        again later, with backoff up to 30 s, until the queue is free; the first time is
        logged as a warning, the take-over as info. One consumer per inbox is what keeps two
        gateways sharing a registry (a cloned VM, a restored snapshot, a home on NFS) from
        each delivering about half of the messages."""
        assert self.connection is not None
        if self._probe is None or not self._probe.is_open:
            self._probe = self.connection.channel()
        consumers = self._probe.queue_declare(queue, passive=True).method.consumer_count
        entry = self.elsewhere.get(queue)
        if not consumers:
            if entry is not None:
                del self.elsewhere[queue]
                glog.event(logger, "queue is free again; serving it here", queue=queue, what=what)
            return False
        # just reconnected: the consumer may be this gateway's own, on the connection the
        # broker has not noticed is gone yet; look again every second meanwhile, rather than
        # backing off as from a stranger (a killed cluster node's consumers are not counted)
        own_leftover = self._lost_at is not None and time.monotonic() - self._lost_at < self._stale_grace
        if entry is None:
            entry = self.elsewhere[queue] = _Elsewhere(what, retry)
            if own_leftover:
                glog.event(logger, "queue still has this gateway's previous consumer; waiting for the broker "
                           "to drop it", queue=queue, what=what)
            else:
                glog.event(logger, "queue is consumed by another client; not serving it here until it goes away",
                           logging.WARNING, queue=queue, what=what,
                           hint="another gateway with a copy of this host's files? (a cloned VM, a restored "
                                "snapshot, a shared home directory): stop it")
        elif not own_leftover:
            entry.interval = min(entry.interval * 2, 30.0)
        entry.next_at = time.monotonic() + entry.interval
        return True

    def _retry_elsewhere(self) -> None:
        if self.channel is None:
            return
        now = time.monotonic()
        for entry in [e for e in self.elsewhere.values() if e.next_at <= now]:
            entry.retry()

    def attach_entity(self, entity: Entity) -> None:
        """Start serving a newly registered entity (I/O thread)."""
        if entity.gid in self.consumers:
            return
        if self.channel is not None:
            self._attach(entity)
        glog.event(logger, "entity registered", entity=entity.label, gid=entity.gid, deliver=entity.deliver)
        for hook in self.on_entity_added:
            hook(entity)

    def detach_entity(self, entity: Entity, reason: str = "unregistered") -> int:
        """Stop serving an entity; dead-letter whatever is still in its inbox, then delete
        the inbox. Returns how many messages were dead-lettered (I/O thread)."""
        consumer = self.consumers.pop(entity.gid, None)
        self.elsewhere.pop(topology.inbox_name(entity.gid), None)
        if consumer is not None:
            if consumer.tag and self.channel is not None:
                self.channel.basic_cancel(consumer.tag)
            if consumer.worker is not None:
                consumer.worker.stop()
        moved = 0
        if self.connection is not None:
            side = self.connection.channel()  # a 404 here must not close the consumer channel
            try:
                moved = drain_to_dlq(side, self.publisher, topology.inbox_name(entity.gid),
                                     "recipient_unregistered", f"entity {entity.label} was unregistered")
                if side.is_open:
                    side.queue_delete(topology.inbox_name(entity.gid))
            finally:
                if side.is_open:
                    side.close()
        for hook in self.on_entity_removed:
            hook(entity, reason)
        glog.event(logger, "entity unregistered", entity=entity.label, gid=entity.gid, dead_lettered=moved)
        return moved

    def _on_message(self, entity: Entity, generation: int, method: Any, props: Any, body: bytes) -> None:
        try:
            self._handle_message(entity, generation, method, props, body)
        except amqp_conn.CONNECTION_ERRORS + (pika.exceptions.AMQPConnectionError,
                                              pika.exceptions.ChannelClosed):
            raise
        except Exception as exc:  # a bug or a plugin surprise: keep the message, keep serving
            detail = f"{type(exc).__name__}: {exc}"
            key = getattr(props, "message_id", None) or "body-" + hashlib.sha256(body).hexdigest()[:32]
            self._batch_safe_rollback()
            attempts = self.store.add_attempt(key, detail)
            if attempts >= self.max_attempts:  # never an endless hot requeue loop
                self._dead_letter(method, props, body, topology.inbox_name(entity.gid), "gateway_error",
                                  detail, attempts)
                return
            glog.event(logger, "message handling failed; requeued", logging.ERROR, entity=entity.label,
                       attempt=attempts, error=detail)
            self.channel.basic_nack(method.delivery_tag, requeue=True)

    def _batch_safe_rollback(self) -> None:
        """After an unexpected error mid-burst: commit what was delivered so far (acks follow)."""
        try:
            self._flush_batch()
        except Exception:
            self.burst.rollback()

    def _handle_message(self, entity: Entity, generation: int, method: Any, props: Any, body: bytes) -> None:
        queue_name = topology.inbox_name(entity.gid)
        try:
            envelope = env_mod.parse(body, max_content_bytes=max(self.max_content, 1), keep_raw=True)
        except InvalidEnvelope as exc:
            self._dead_letter(method, props, body, queue_name, exc.reason, exc.detail)
            return
        if envelope.recipient != entity.gid:
            self._dead_letter(method, props, body, queue_name, "recipient_mismatch",
                              f"body is addressed to {envelope.recipient}, queue belongs to {entity.gid}")
            return
        if props is not None and getattr(props, "user_id", None):
            envelope = Envelope(**{**envelope.__dict__, "user_id": props.user_id})
        mismatch = self._identity_policy.mode != "off" and identity.verify(
            self.config.values, envelope, getattr(self, "roster", None))
        if mismatch:
            self._dead_letter(method, props, body, queue_name, "sender_mismatch", mismatch)
            return
        if self.store.seen(envelope.msg_id):
            glog.event(logger, "duplicate dropped", entity=entity.label, msg=envelope.msg_id)
            self.channel.basic_ack(method.delivery_tag)
            return
        item = Delivery(generation, method.delivery_tag, envelope, props, body, queue_name)
        consumer = self.consumers.get(entity.gid)
        if consumer is not None and consumer.worker is not None:
            self._worker_tags.add(method.delivery_tag)
            consumer.worker.items.put(item)
            return
        # inline backend: deliver now, inside the open batch transaction; the commit and the
        # acks follow in _flush_batch (end of this burst of deliveries, or BATCH_MAX)
        backend = self.backend_for(entity)
        try:
            size = self.burst.add(method.delivery_tag, entity, backend, envelope,
                                  lambda: self._deliver_once(entity, backend, envelope, announce=False))
        except DeliveryError as exc:
            self._flush_batch()
            attempts = self.store.add_attempt(envelope.msg_id, str(exc))
            if not exc.retryable or attempts >= self.max_attempts:
                self._dead_letter(method, props, body, queue_name, "delivery_failed", str(exc), attempts)
            else:
                self.channel.basic_nack(method.delivery_tag, requeue=True)
            return
        if size >= BATCH_MAX:
            self._flush_batch()

    def _flush_batch(self) -> None:
        """Commit the burst's dedup/hold records (and hand its taken messages to their
        waiters), then ack and announce each message."""
        batch = list(self.burst.deliveries)
        try:
            self.burst.commit()
        except Exception as exc:  # a full or failing disk: nothing of the burst is acked or handed
            if not batch:
                raise
            self._requeue_uncommitted(batch, exc)
            return
        if not batch:
            return
        # committed (safe against a crash): wake the waiting `poll --wait` / `send --wait` now,
        # so the disk sync below runs while they answer; the acks wait for the sync. A power
        # cut before it only means a redelivery (the broker still has every unacked message)
        for _, _, envelope in batch:
            self._notify(envelope)
        last = batch[-1][0]
        if not any(tag < last for tag in self._worker_tags):
            # one ack frame for the whole burst: every unacked delivery up to `last` on this
            # channel is in the batch (workers' deliveries are tracked and none is older)
            acks = [(last, True)]
        else:
            acks = [(tag, False) for tag, _, _ in batch]
        self._ack_when_synced(acks)
        if len(batch) == 1:
            _, entity, envelope = batch[0]
            self._log_delivered(entity, envelope)
        else:  # one line per committed burst: a log line per message would cost more than the delivery
            glog.event(logger, "delivered", count=len(batch), entities=len({e.gid for _, e, _ in batch}),
                       first=batch[0][2].msg_id, last=batch[-1][2].msg_id)

    def _ack_when_synced(self, acks: list[tuple[int, bool]]) -> None:
        """Ack once the store has synced what was just committed: acks follow durability,
        power cuts included. One sync per burst (group commit), here on the I/O thread: the
        burst's waiters were handed their messages before it and answer while it runs; a
        sync thread cost more in delayed acks than the sync blocks (docs/benchmarks.md)."""
        failed = None
        try:
            self.store.sync()
        except Exception as exc:  # a failing disk: the broker gets the burst back
            failed = exc
        self._after_sync(self.generation, acks, failed)

    def _after_sync(self, generation: int, acks: list[tuple[int, bool]], failed: BaseException | None) -> None:
        if generation != self.generation or self.channel is None or not self.channel.is_open:
            return  # a channel since replaced: its deliveries come again, the dedup drops them
        # queued on the channel, not flushed one by one: BlockingChannel.basic_ack spins the
        # I/O loop until its frame is written, while the loop's next poll writes it anyway
        impl = self.channel._impl
        for tag, multiple in acks:
            if failed is None:
                impl.basic_ack(tag, multiple=multiple)
            else:
                impl.basic_nack(tag, multiple=multiple, requeue=True)
        if failed is not None:
            glog.event(logger, "store sync failed; burst requeued", logging.ERROR, error=str(failed))

    def _requeue_uncommitted(self, batch: list[tuple[int, Entity, Envelope]], exc: Exception) -> None:
        """The burst's commit failed: roll it back, hand nothing to waiters, and give every
        delivery back to the broker now (nack, requeue) so it comes again, instead of leaving
        it unacked until the channel closes (the burst rolled its transaction back)."""
        for tag, _, _ in batch:
            self.channel.basic_nack(tag, requeue=True)
        glog.event(logger, "store commit failed; burst requeued", logging.ERROR, count=len(batch),
                   error=f"{type(exc).__name__}: {exc}")

    # --- delivering ---------------------------------------------------------------------

    def _deliver_once(self, entity: Entity, backend: DeliveryBackend, envelope: Envelope,
                      announce: bool = True) -> None:
        """Hand one message to the backend and write its dedup record."""
        records_itself = getattr(backend, "records_itself", False)
        if getattr(backend, "stage", False):
            self.store.stage(envelope)  # visible to `bridge reply` while the backend runs
        try:
            backend.deliver(entity, envelope)
        except DeliveryError:
            raise
        except BridgeError as exc:
            raise DeliveryError(str(exc)) from exc
        except Exception as exc:  # a plugin bug must not kill the gateway
            raise DeliveryError(f"backend {entity.backend} raised {type(exc).__name__}: {exc}") from exc
        if not records_itself:
            self.store.record(envelope, DELIVERED)
        if announce:
            self._announce(entity, envelope)

    def _announce(self, entity: Entity, envelope: Envelope) -> None:
        self._log_delivered(entity, envelope)
        self._notify(envelope)

    def _log_delivered(self, entity: Entity, envelope: Envelope) -> None:
        glog.event(logger, "delivered", entity=entity.label, kind=envelope.kind, msg=envelope.msg_id,
                   sender=envelope.sender_label or envelope.sender[:8])

    def _threadsafe(self, fn: Callable[[], None]) -> None:
        """Queue ``fn`` for the I/O thread. A failure inside it is logged, never fatal
        (a lost connection still propagates, so the reconnect loop takes over)."""
        connection = self.connection
        if connection is None:
            return

        def guarded() -> None:
            try:
                fn()
            except amqp_conn.CONNECTION_ERRORS + (pika.exceptions.AMQPConnectionError,):
                raise
            except Exception as exc:
                glog.event(logger, "I/O task failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")

        try:
            connection.add_callback_threadsafe(guarded)
        except Exception:
            pass  # connection gone: the broker redelivers

    def _ack_threadsafe(self, item: Delivery) -> None:
        def ack() -> None:
            if item.generation == self.generation and self.channel is not None:
                self._worker_tags.discard(item.tag)
                self.channel.basic_ack(item.tag)

        self._threadsafe(ack)

    def _dead_letter_item(self, item: Delivery, reason: str, detail: str, attempts: int) -> None:
        if item.generation != self.generation:
            return
        self._worker_tags.discard(item.tag)
        self._dead_letter(_Tag(item.tag), item.properties, item.body, item.queue, reason, detail, attempts)

    def _dead_letter(self, method: Any, props: Any, body: bytes, queue_name: str, reason: str,
                     detail: str, attempts: int | None = None) -> None:
        """Publish to ``bridge.dlx`` with the reason in headers, then ack the original —
        the message is never dropped silently and never blocks the queue."""
        assert self.publisher is not None and self.channel is not None
        headers = dict(getattr(props, "headers", None) or {})
        headers.update({topology.REASON_HEADER: reason, topology.DETAIL_HEADER: detail[:1000],
                        topology.QUEUE_HEADER: queue_name})
        if attempts is not None:
            headers[topology.ATTEMPTS_HEADER] = attempts
        properties = pika.BasicProperties(
            message_id=getattr(props, "message_id", None), correlation_id=getattr(props, "correlation_id", None),
            type=getattr(props, "type", None), timestamp=getattr(props, "timestamp", None),
            app_id=getattr(props, "app_id", None), content_type=getattr(props, "content_type", None),
            delivery_mode=2, headers=headers)
        routing_key = queue_name.split(".")[1] if queue_name.startswith("agent.") else queue_name
        self.publisher.publish_raw(topology.DLX, routing_key, body, properties, mandatory=False,
                                   what="dead letter")
        self.channel.basic_ack(method.delivery_tag)
        glog.event(logger, "dead-lettered", logging.WARNING, queue=queue_name, reason=reason, detail=detail[:200])

    # --- publishing ---------------------------------------------------------------------

    def publish(self, envelopes: list[Envelope], delay_ms: int | None = None, timeout: float = 30.0) -> None:
        """Publish for a local sender, confirmed + mandatory, through the publish lane (from
        any thread but the I/O thread, which it never blocks)."""
        self.lane.publish(envelopes, delay_ms=delay_ms, timeout=timeout)

    def resolve_target(self, target: str, force: bool = False) -> str:
        """A gid for ``target`` (gid, or label): local entities first, then the roster."""
        from bridgecli.resolve import resolve_target

        roster = getattr(self, "roster", None)
        return self.once_roster_complete(
            lambda: resolve_target(target, registry=self.registry, roster=roster, force=force))

    def once_roster_complete(self, lookup: Callable[[], T]) -> T:
        """Run ``lookup`` (something that consults the roster); while it raises
        :class:`~bridgecli.errors.NotFound` and this gateway connected less than one heartbeat
        interval ago, retry: the view has not heard every host yet, so wait for it to fill
        before calling a target or host unknown."""
        from bridgecli.errors import NotFound

        while True:
            try:
                return lookup()
            except NotFound:
                if getattr(self, "roster", None) is None or time.monotonic() >= self.roster_complete_at:
                    raise
                time.sleep(0.1)

    # --- waiting for held messages ------------------------------------------------------

    def take_handed(self, waiter: Waiter) -> list[StoredMessage]:
        """The messages handed to ``waiter`` since it last looked (an API thread's call)."""
        with self.waiters_lock:
            handed, waiter.handed = waiter.handed, []
        return handed

    def _notify(self, envelope: Envelope) -> None:
        with self.waiters_lock:
            for waiter in self.waiters:
                if waiter.recipient == envelope.recipient and (
                        waiter.in_reply_to is None or waiter.in_reply_to == envelope.in_reply_to):
                    waiter.notified = True
                    waiter.event.set()

    def add_waiter(self, recipient: str, in_reply_to: str | None = None, claims: int = 0,
                   two_phase: bool = False, peer: str | None = None) -> Waiter:
        waiter = Waiter(recipient, in_reply_to, claims=claims, two_phase=two_phase, peer=peer)
        with self.waiters_lock:
            self.waiters.append(waiter)
        return waiter

    def release_taken(self, msg_ids: list[str]) -> None:
        """A client went away without confirming ``msg_ids``: hold them again and tell the
        other waiters (an API thread's call)."""
        if not msg_ids or not self.store.release(msg_ids):
            return
        for msg_id in msg_ids:
            stored = self.store.get(msg_id)
            if stored is not None:
                self._notify(stored.envelope)
        glog.event(logger, "unconfirmed messages held again", count=len(msg_ids), first=msg_ids[0])

    def remove_waiter(self, waiter: Waiter) -> None:
        """Unregister ``waiter``; messages handed to it that it did not pick up (it timed out
        or failed as one came) go back on hold, and other waiters are told."""
        with self.waiters_lock:
            if waiter in self.waiters:
                self.waiters.remove(waiter)
            leftover, waiter.handed = waiter.handed, []
        if leftover:
            self.store.release([m.envelope.msg_id for m in leftover])
            for stored in leftover:
                self._notify(stored.envelope)

    # --- running work on the I/O thread -------------------------------------------------

    def on_io(self, fn: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Run ``fn`` on the I/O thread and return its result (from a non-I/O thread)."""
        if not self.connected.wait(timeout=min(timeout, 5.0)):
            raise BrokerUnavailable("the gateway is not connected to the broker right now",
                                    "see the gateway's log; it reconnects by itself")
        future: Future = Future()

        def call() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:
                    future.set_exception(exc)

        connection = self.connection
        if connection is None:
            raise BrokerUnavailable("the gateway lost its broker connection", "retry in a moment")
        connection.add_callback_threadsafe(call)
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            future.cancel()
            raise BrokerUnavailable("the gateway's broker connection is stalled", "retry in a moment") from None
        except amqp_conn.CONNECTION_ERRORS as exc:
            raise BrokerUnavailable(f"lost the broker connection ({type(exc).__name__})",
                                    "retry in a moment") from None

    def queue_depths(self) -> dict[str, int]:
        """Ready counts of each local inbox and of the DLQ (I/O thread)."""
        depths: dict[str, int] = {}
        assert self.connection is not None
        probe = self.connection.channel()
        try:
            for gid in self.consumers:
                name = topology.inbox_name(gid)
                depths[name] = probe.queue_declare(name, passive=True).method.message_count
            depths[topology.DLQ] = probe.queue_declare(topology.DLQ, passive=True).method.message_count
        finally:
            if probe.is_open:
                probe.close()
        return depths


@dataclass
class _Tag:
    delivery_tag: int
