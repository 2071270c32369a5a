"""The gateway's inbox consumers: one per local entity, attached on (re)connect, detached on
unregister, each with its worker thread when its backend may block.

Why a module of its own: which inbox is consumed, by what, and with which worker is state of
its own, kept across reconnects (a second worker for one entity would break its order).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bridgecli.amqp import topology
from bridgecli.errors import BridgeError
from bridgecli.gateway import log as glog
from bridgecli.gateway.backends import Backends
from bridgecli.gateway.deadletter import drain_to_dlq
from bridgecli.gateway.entity_worker import EntityWorker, WorkerHost, drain_queue
from bridgecli.interfaces import Entity

logger = logging.getLogger("bridgecli.gateway")


@dataclass
class Consumer:
    """One entity's inbox consumer: its consumer tag (None while not consuming) and worker."""

    entity: Entity
    tag: str | None = None
    worker: EntityWorker | None = None


class InboxHost(WorkerHost, Protocol):
    """What the consumers need of the gateway (implemented by ``Gateway``, I/O thread)."""

    connection: Any
    channel: Any
    publisher: Any
    queue_type: str
    backends: Backends

    @property
    def exclusive(self) -> bool: ...

    def consumed_elsewhere(self, queue: str, retry: Callable[[], None], what: str) -> bool: ...

    def on_message(self, entity: Entity, generation: int, method: Any, props: Any, body: bytes) -> None: ...


class Inboxes:
    """The consumers by entity gid (I/O thread only)."""

    def __init__(self, host: InboxHost, bind_channels: Callable[[Entity], None]) -> None:
        self.host = host
        #: binds an inbox just declared to its entity's channels
        self.bind_channels = bind_channels
        self.consumers: dict[str, Consumer] = {}

    def attach_all(self, entities: list[Entity]) -> None:
        """After a (re)connect: attach every entity, keeping each one's worker thread (stale
        items are dropped by generation); workers of entities gone meanwhile stop."""
        previous, self.consumers = self.consumers, {}
        for entity in entities:
            if entity.gid in previous:
                kept = previous.pop(entity.gid)
                kept.tag = None
                self.consumers[entity.gid] = kept
            self.attach(entity)
        for stale in previous.values():
            if stale.worker is not None:
                stale.worker.stop()

    def attach(self, entity: Entity) -> None:
        """Declare the entity's inbox and start its manual-ack, exclusive consumer (unless
        another client consumes the inbox: then it is retried with backoff)."""
        host = self.host
        assert host.channel is not None
        queue = topology.inbox_name(entity.gid)
        topology.declare(host.channel, topology.inbox_queue(entity.gid, host.queue_type, host.max_attempts))
        self.bind_channels(entity)
        consumer = self.consumers.get(entity.gid) or Consumer(entity)
        self.consumers[entity.gid] = consumer
        if host.consumed_elsewhere(queue, lambda: self._reattach(entity), f"entity {entity.label}"):
            return
        try:
            backend = host.backends.for_entity(entity)
        except BridgeError as exc:
            glog.event(
                logger,
                "entity has no usable backend; not consuming",
                logging.ERROR,
                entity=entity.label,
                error=str(exc),
            )
            return
        if not host.backends.traits(entity).inline and consumer.worker is None:
            consumer.worker = EntityWorker(host, entity, backend)
            consumer.worker.start()
        generation = host.generation
        consumer.tag = host.channel.basic_consume(
            queue,
            lambda ch, method, props, body: host.on_message(entity, generation, method, props, body),
            exclusive=host.exclusive,
            in_loop=True,  # intake never waits: a dead letter waits for the next step
        )

    def _reattach(self, entity: Entity) -> None:
        if entity.gid in self.consumers and self.consumers[entity.gid].tag is None:
            self.attach(entity)

    def detach(self, entity: Entity) -> int:
        """Stop consuming ``entity``'s inbox and its worker; dead-letter what is still in the
        inbox, then delete it. Returns how many messages were dead-lettered."""
        host = self.host
        consumer = self.consumers.pop(entity.gid, None)
        if consumer is not None:
            if consumer.tag and host.channel is not None:
                host.channel.basic_cancel(consumer.tag)
            if consumer.worker is not None:
                consumer.worker.stop()
        moved = 0
        if host.connection is not None:
            side = host.connection.sync_channel(30.0, "drain")  # a 404 here must not close the consumer channel
            try:
                moved = drain_to_dlq(
                    side,
                    host.publisher,
                    topology.inbox_name(entity.gid),
                    "recipient_unregistered",
                    f"entity {entity.label} was unregistered",
                )
                if side.is_open:
                    side.queue_delete(topology.inbox_name(entity.gid))
            finally:
                if side.is_open:
                    side.close()
        return moved

    def worker_of(self, gid: str) -> EntityWorker | None:
        consumer = self.consumers.get(gid)
        return consumer.worker if consumer is not None else None

    def workers(self) -> list[EntityWorker]:
        return [c.worker for c in self.consumers.values() if c.worker is not None]

    def forget_queued(self) -> None:
        """Drop every worker's not yet started deliveries: the broker redelivers them."""
        for worker in self.workers():
            drain_queue(worker.items)
