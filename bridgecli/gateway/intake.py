"""What the I/O thread does with one delivery from a local inbox: parse and validate it, check
its sender, drop a duplicate, then queue it for the entity's worker or deliver it inline in the
open burst; a failure requeues it or, past ``messaging.max_attempts``, dead-letters it.

Why a module of its own: the checks a message passes are one decision, apart from the
connection and the loop the gateway runs them on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from typing import Any, Protocol

import pika.exceptions

from bridgecli import channels
from bridgecli import envelope as env_mod
from bridgecli.amqp import connection as amqp_conn
from bridgecli.amqp import topology
from bridgecli.envelope import Envelope, InvalidEnvelope
from bridgecli.errors import DeliveryError
from bridgecli.gateway import identity
from bridgecli.gateway import log as glog
from bridgecli.gateway.backends import Backends
from bridgecli.gateway.burst import Burst
from bridgecli.gateway.entity_worker import Delivery
from bridgecli.gateway.events import GatewayEvents
from bridgecli.gateway.inboxes import Inboxes
from bridgecli.hoststate.entities import Registry
from bridgecli.hoststate.store import Store
from bridgecli.interfaces import DeliveryBackend, Entity

logger = logging.getLogger("bridgecli.gateway")
#: most inline deliveries committed and acked together
BATCH_MAX = 256


class IntakeHost(Protocol):
    """What intake needs of the gateway (implemented by ``Gateway``, I/O thread)."""

    channel: Any
    #: the fleet's roster view (``get(gid) -> entry.host``), or None before presence runs
    roster: Any
    #: counts duplicates and retries (``gateway/events.py``)
    events: GatewayEvents

    def backend_for(self, entity: Entity) -> DeliveryBackend: ...

    def flush_batch(self) -> None: ...

    def dead_letter(
        self, tag: int, props: Any, body: bytes, queue_name: str, reason: str, detail: str, attempts: int | None = None
    ) -> None: ...


class Intake:
    """Handles the deliveries of every local inbox (I/O thread only)."""

    def __init__(
        self,
        host: IntakeHost,
        values: dict[str, Any],
        store: Store,
        burst: Burst,
        inboxes: Inboxes,
        backends: Backends,
        registry: Registry,
    ) -> None:
        self.host = host
        #: whose channel memberships a channel copy is checked against
        self.registry = registry
        self.values = values
        self.store = store
        self.burst = burst
        self.inboxes = inboxes
        self.backends = backends
        self.max_attempts: int = values["messaging.max_attempts"]
        self.max_content: int = values["messaging.max_content_bytes"]

    def on_message(self, entity: Entity, generation: int, method: Any, props: Any, body: bytes) -> None:
        """Handle one delivery to ``entity``'s inbox; an unexpected error requeues it (counted)."""
        try:
            self._handle_message(entity, generation, method, props, body)
        except amqp_conn.CONNECTION_ERRORS + (pika.exceptions.AMQPConnectionError, pika.exceptions.ChannelClosed):
            raise
        except Exception as exc:  # a bug or a plugin surprise: keep the message, keep serving
            detail = f"{type(exc).__name__}: {exc}"
            key = getattr(props, "message_id", None) or "body-" + hashlib.sha256(body).hexdigest()[:32]
            self._batch_safe_rollback()
            attempts = self.store.add_attempt(key, detail)
            if attempts >= self.max_attempts:  # never an endless hot requeue loop
                self.host.dead_letter(
                    method.delivery_tag, props, body, topology.inbox_name(entity.gid), "gateway_error", detail, attempts
                )
                return
            glog.event(
                logger,
                "message handling failed; requeued",
                logging.ERROR,
                entity=entity.label,
                attempt=attempts,
                error=detail,
            )
            self.host.channel.basic_nack(method.delivery_tag, requeue=True)

    def _batch_safe_rollback(self) -> None:
        """After an unexpected error mid-burst: commit what was delivered so far (acks follow)."""
        try:
            self.host.flush_batch()
        except Exception:
            self.burst.rollback()

    def _channel_copy(
        self, entity: Entity, envelope: Envelope, method: Any, props: Any, body: bytes, queue_name: str
    ) -> Envelope | None:
        """``entity``'s own copy of channel message ``envelope`` (its id derived from the
        member, :func:`bridgecli.channels.copy_id`), or None when it was handled here: a copy
        of the member's own message is dropped, and one for a channel the entity is not in
        (a binding made behind bridge's back) or that claims to be a copy already is
        dead-lettered."""
        host = self.host
        if envelope.copy_of is not None:
            host.dead_letter(
                method.delivery_tag, props, body, queue_name, "bad_field", "copyOf is set by the receiving gateway"
            )
            return None
        if not self.registry.is_member(envelope.channel or "", entity.gid):
            host.dead_letter(
                method.delivery_tag,
                props,
                body,
                queue_name,
                "not_a_member",
                f"{entity.label} is not in channel #{envelope.channel}",
            )
            return None
        if envelope.sender == entity.gid:  # the sender does not get its own message back
            host.channel.basic_ack(method.delivery_tag)
            return None
        return dataclasses.replace(
            envelope,
            msg_id=channels.copy_id(envelope.msg_id, entity.gid),
            recipient=entity.gid,
            copy_of=envelope.msg_id,
            raw=None,
        )

    def _handle_message(self, entity: Entity, generation: int, method: Any, props: Any, body: bytes) -> None:
        host = self.host
        queue_name = topology.inbox_name(entity.gid)
        try:
            envelope = env_mod.parse(
                body,
                max_content_bytes=max(self.max_content, 1),
                keep_raw=True,
                user_id=getattr(props, "user_id", None) or None,
            )
        except InvalidEnvelope as exc:
            host.dead_letter(method.delivery_tag, props, body, queue_name, exc.reason, exc.detail)
            return
        if envelope.channel is not None:
            copy = self._channel_copy(entity, envelope, method, props, body, queue_name)
            if copy is None:
                return
            envelope = copy
        if envelope.recipient != entity.gid:
            host.dead_letter(
                method.delivery_tag,
                props,
                body,
                queue_name,
                "recipient_mismatch",
                f"body is addressed to {envelope.recipient}, queue belongs to {entity.gid}",
            )
            return
        mismatch = self.values["security.sender_check"] != "off" and identity.verify(self.values, envelope, host.roster)
        if mismatch:
            host.dead_letter(method.delivery_tag, props, body, queue_name, "sender_mismatch", mismatch)
            return
        if self.store.seen(envelope.msg_id):
            glog.event(logger, "duplicate dropped", entity=entity.label, gid=entity.gid, msg=envelope.msg_id)
            host.events.deduplicated(entity, envelope)
            host.channel.basic_ack(method.delivery_tag)
            return
        item = Delivery(generation, method.delivery_tag, envelope, props, body, queue_name)
        worker = self.inboxes.worker_of(entity.gid)
        if worker is not None:
            self.burst.at_worker.add(method.delivery_tag)
            worker.items.put(item)
            return
        # inline backend: deliver now, inside the open batch transaction; the commit and the
        # acks follow in the host's flush_batch (end of this burst of deliveries, or BATCH_MAX)
        backend = host.backend_for(entity)
        traits = self.backends.traits(entity)
        try:
            size = self.burst.add(
                method.delivery_tag,
                entity,
                backend,
                traits,
                envelope,
                lambda tx: self.backends.deliver(entity, backend, envelope, tx, traits),
            )
        except DeliveryError as exc:
            host.flush_batch()
            attempts = self.store.add_attempt(envelope.msg_id, str(exc))
            if not exc.retryable or attempts >= self.max_attempts:
                host.dead_letter(method.delivery_tag, props, body, queue_name, "delivery_failed", str(exc), attempts)
            else:
                host.events.retried(entity, envelope)
                host.channel.basic_nack(method.delivery_tag, requeue=True)
            return
        if size >= BATCH_MAX:
            host.flush_batch()
