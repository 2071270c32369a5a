"""Per-entity delivery workers: the gateway's threads for backends that may block.

One thread per entity keeps that entity's messages in order (per-recipient FIFO) while a slow
delivery (a tmux pane, a herdr agent, an exec command) never stalls the AMQP I/O thread. A
worker never touches pika: acks and dead letters go back to the I/O thread through its
:class:`WorkerHost`.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from typing import Any, Protocol

import tenacity

from bridgecli.envelope import Envelope
from bridgecli.errors import DeliveryError
from bridgecli.gateway import log as glog
from bridgecli.gateway.events import GatewayEvents
from bridgecli.interfaces import DeliveryBackend, Entity

logger = logging.getLogger("bridgecli.gateway")


@dataclass
class Delivery:
    generation: int
    tag: int
    envelope: Envelope
    properties: Any
    body: bytes
    queue: str


class AttemptLog(Protocol):
    def seen(self, msg_id: str) -> bool: ...
    def add_attempt(self, msg_id: str, error: str) -> int: ...


class WorkerHost(Protocol):
    """What a worker needs of the gateway (implemented by ``Gateway``)."""

    #: bumped on every (re)connect: an item of an older generation is dropped
    generation: int
    should_stop: threading.Event
    connected: threading.Event
    max_attempts: int
    #: counts duplicates and retries
    events: GatewayEvents

    @property
    def store(self) -> AttemptLog:
        """Read-only here, so a gateway holding a richer store still fits."""

    def deliver_once(self, entity: Entity, backend: DeliveryBackend, envelope: Envelope) -> None:
        """Deliver, write the dedup record and announce; raises DeliveryError."""

    def ack_from_worker(self, item: Delivery) -> None:
        """Ack ``item`` from the I/O thread (thread-safe)."""

    def dead_letter_from_worker(self, item: Delivery, reason: str, detail: str, attempts: int) -> None:
        """Dead-letter ``item`` from the I/O thread (thread-safe)."""


@dataclass
class _Attempt:
    """What tenacity's wait strategies read from a retry state."""

    attempt_number: int


class EntityWorker(threading.Thread):
    """Delivers one entity's messages in order through a blocking backend."""

    def __init__(self, gateway: WorkerHost, entity: Entity, backend: DeliveryBackend) -> None:
        super().__init__(name=f"deliver-{entity.label}", daemon=True)
        self.gateway = gateway
        self.entity = entity
        self.backend = backend
        self.items: queue.Queue[Delivery | None] = queue.Queue()

    def run(self) -> None:
        while True:
            item = self.items.get()
            if item is None:
                return
            self.deliver_with_retries(item)

    def stop(self) -> None:
        self.items.put(None)

    def deliver_with_retries(self, item: Delivery) -> None:
        """Deliver with capped exponential backoff; dead-letter after N attempts."""
        gw, entity, backend = self.gateway, self.entity, self.backend
        wait = tenacity.wait_exponential(multiplier=0.5, max=30)
        while True:
            if item.generation != gw.generation or gw.should_stop.is_set() and not gw.connected.is_set():
                return  # the broker will redeliver it to the next channel
            if gw.store.seen(item.envelope.msg_id):
                gw.events.deduplicated(entity, item.envelope)
                gw.ack_from_worker(item)
                return
            try:
                gw.deliver_once(entity, backend, item.envelope)
            except DeliveryError as exc:
                attempts = gw.store.add_attempt(item.envelope.msg_id, str(exc))
                glog.event(
                    logger,
                    "delivery failed",
                    logging.WARNING,
                    entity=entity.label,
                    msg=item.envelope.msg_id,
                    attempt=attempts,
                    error=str(exc),
                )
                if not exc.retryable or attempts >= gw.max_attempts:
                    gw.dead_letter_from_worker(item, "delivery_failed", str(exc), attempts)
                    return
                gw.events.retried(entity, item.envelope)
                # tenacity annotates the full RetryCallState; its waits read only attempt_number
                delay = wait(_Attempt(attempts))  # type: ignore[arg-type]
                if gw.should_stop.wait(delay):
                    return
                continue
            gw.ack_from_worker(item)
            return


def drain_queue(items: queue.Queue) -> None:
    """Forget queued (not yet started) deliveries: the broker redelivers them."""
    try:
        while True:
            items.get_nowait()
    except queue.Empty:
        pass
