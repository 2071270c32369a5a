"""Per-entity delivery workers: the gateway's threads for backends that may block.

One thread per entity keeps that entity's messages in order (per-recipient FIFO) while a slow
delivery (a tmux pane, a herdr agent, an exec command) never stalls the AMQP I/O thread. A
worker never touches pika: acks and dead letters go back to the I/O thread through
``Gateway._threadsafe``.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import tenacity

from bridgecli.envelope import Envelope
from bridgecli.errors import DeliveryError
from bridgecli.gateway import log as glog
from bridgecli.interfaces import DeliveryBackend, Entity

if TYPE_CHECKING:
    from bridgecli.gateway.daemon import Gateway

logger = logging.getLogger("bridgecli.gateway")


@dataclass
class Delivery:
    generation: int
    tag: int
    envelope: Envelope
    properties: Any
    body: bytes
    queue: str


@dataclass
class _Attempt:
    """What tenacity's wait strategies read from a retry state."""

    attempt_number: int


class EntityWorker(threading.Thread):
    """Delivers one entity's messages in order through a blocking backend."""

    def __init__(self, gateway: "Gateway", entity: Entity, backend: DeliveryBackend) -> None:
        super().__init__(name=f"deliver-{entity.label}", daemon=True)
        self.gateway = gateway
        self.entity = entity
        self.backend = backend
        self.items: "queue.Queue[Delivery | None]" = queue.Queue()
        self.busy = False

    def run(self) -> None:
        while True:
            item = self.items.get()
            if item is None:
                return
            self.busy = True
            try:
                self.deliver_with_retries(item)
            finally:
                self.busy = False

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
                gw._ack_threadsafe(item)
                return
            try:
                gw._deliver_once(entity, backend, item.envelope)
            except DeliveryError as exc:
                attempts = gw.store.add_attempt(item.envelope.msg_id, str(exc))
                glog.event(logger, "delivery failed", logging.WARNING, entity=entity.label,
                           msg=item.envelope.msg_id, attempt=attempts, error=str(exc))
                if not exc.retryable or attempts >= gw.max_attempts:
                    detail = str(exc)
                    gw._threadsafe(lambda: gw._dead_letter_item(item, "delivery_failed", detail, attempts))
                    return
                delay = wait(_Attempt(attempts))
                if gw.should_stop.wait(delay):
                    return
                continue
            gw._ack_threadsafe(item)
            return


def drain_queue(items: "queue.Queue") -> None:
    """Forget queued (not yet started) deliveries: the broker redelivers them."""
    try:
        while True:
            items.get_nowait()
    except queue.Empty:
        pass
