"""The registrar's pika shell: consume ``bridge.registrar``, answer on direct reply-to.

Every delivery is acked exactly once, whatever its body: a body the registrar refuses gets
its refusal; a request whose handling raised is copied to ``bridge.dlx`` with the reason and
acked, never requeued, so one poison request cannot stop the registrar at every start. An
answer goes only to the requester's direct reply-to: the registrar publishes with the hub's
full rights, so a ``reply_to`` naming any other queue is ignored (and logged).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from typing import Any, Protocol

from bridgecli.amqp import topology
from bridgecli.errors import BridgeError
from bridgecli.hub import limits, permissions
from bridgecli.hub.claims import NODE_ROUTING_KEY, ROUTING_KEY
from bridgecli.hub.state_replica import REGISTRAR_ARGUMENTS, StateReplica

logger = logging.getLogger("bridgecli.hub.registrar")
QUEUE = permissions.REGISTRAR_EXCHANGE
#: a cluster hub's node enrolments (routed by NODE_ROUTING_KEY): only the hub machine's
#: registrar consumes them, whichever registrar is active
NODE_QUEUE = f"{QUEUE}.nodes"
#: the ``x-bridge-reason`` of a request whose handling raised
POISON_REASON = "registrar_refused"


class Registrar(Protocol):
    """What the shell asks of :class:`bridgecli.hub.registrar.Registrar`, which imports this
    module to run it (hence a protocol, not an import)."""

    def handle_body(self, body: bytes, user_id: Any) -> dict[str, Any]: ...
    def drop_due(self) -> None: ...
    def reconcile(self) -> None: ...


def answer_delivery(
    registrar: Registrar, channel: Any, method: Any, props: Any, body: bytes, replica: Any = None
) -> None:
    """Handle one delivery: ack it, dead-letter it if handling raised, answer it on direct
    reply-to. Only a broken connection escapes (the delivery then comes again). With a
    ``replica`` (a cluster hub: a (StateReplica, confirm channel) pair) the newest records
    are loaded first and a change is published, confirmed, before the answer."""
    import pika
    import pika.exceptions

    acked = False
    try:
        user_id = getattr(props, "user_id", None)
        reply_to = getattr(props, "reply_to", None)
        if not limits.is_direct_reply_to(reply_to):
            logger.warning(
                "ignored a request of broker user %r: it asks for an answer at %r, not on direct reply-to",
                str(user_id)[:64],
                str(reply_to)[:80],
            )
            channel.basic_ack(method.delivery_tag)
            return
        if replica is not None:
            replica[0].pull()
        try:
            answer = registrar.handle_body(body, user_id)
        except Exception as exc:  # a bug or a broken disk: dead-letter it, answer, keep serving
            logger.exception("request of broker user %r failed; dead-lettered", str(user_id)[:64])
            dead_letter(channel, props, body, f"{type(exc).__name__}: {exc}")
            answer = {
                "ok": False,
                "kind": "error",
                "error": f"the registrar failed: {type(exc).__name__}",
                "hint": "retry; if it persists, see the hub's registrar.log",
            }
        if replica is not None and replica[0].changed():
            replica[0].push(replica[1])
        channel.basic_ack(method.delivery_tag)
        acked = True
        channel.basic_publish(
            "",
            reply_to,
            json.dumps(answer).encode(),
            pika.BasicProperties(correlation_id=props.correlation_id, content_type="application/json"),
        )
    except (pika.exceptions.AMQPError, OSError):
        raise  # the connection broke: serve reconnects
    except Exception:  # nothing else may stop the consumer: log it and go on
        logger.exception("answering a request failed")
        if not acked:
            channel.basic_ack(method.delivery_tag)


def _answer(registrar: Registrar, replica: Any, channel: Any, method: Any, props: Any, body: bytes) -> None:
    answer_delivery(registrar, channel, method, props, body, replica=replica)


def dead_letter(channel: Any, props: Any, body: bytes, detail: str) -> None:
    """Publish a copy of a failed request to ``bridge.dlx`` with the reason in headers."""
    import pika

    headers = {
        topology.REASON_HEADER: POISON_REASON,
        topology.DETAIL_HEADER: detail[:1000],
        topology.QUEUE_HEADER: QUEUE,
        "x-bridge-user": str(getattr(props, "user_id", None) or "")[:255],
    }
    channel.basic_publish(
        topology.DLX,
        QUEUE,
        body,
        pika.BasicProperties(
            correlation_id=getattr(props, "correlation_id", None),
            content_type=getattr(props, "content_type", None),
            delivery_mode=2,
            headers=headers,
        ),
    )


def _declare(connection: Any, channel: Any, cluster: bool = False, node_requests: bool = False) -> None:
    """The registrar's queue (on a ``cluster`` hub replicated, one consumer active), with
    ``node_requests`` the hub machine's queue of node enrolments (declared by the hub
    machine alone: it lives on the hub's node, which other nodes must not need), and
    ``bridge.dlx`` with ``bridge.dlq`` where it is missing (an existing one is kept)."""
    import pika.exceptions

    channel.exchange_declare(QUEUE, "direct", durable=True)
    channel.queue_declare(QUEUE, durable=True, arguments=REGISTRAR_ARGUMENTS if cluster else None)
    channel.queue_bind(QUEUE, QUEUE, routing_key=ROUTING_KEY)
    if node_requests:
        channel.queue_declare(NODE_QUEUE, durable=True)
        channel.queue_bind(NODE_QUEUE, QUEUE, routing_key=NODE_ROUTING_KEY)
    channel.exchange_declare(topology.DLX, "fanout", durable=True)
    probe = connection.channel()
    try:
        probe.queue_declare(topology.DLQ, passive=True)
        probe.close()
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code != 404:
            raise
        channel.queue_declare(topology.DLQ, durable=True)
        channel.queue_bind(topology.DLQ, topology.DLX)


def serve(
    registrar: Registrar,
    uri: str,
    should_stop: Any,
    sweep_every: float = 60.0,
    replica: StateReplica | None = None,
    name: str = "bridge-hub-registrar",
    node_requests: bool = False,
) -> None:
    """Consume the registrar queue as its only consumer and answer each request, until
    ``should_stop`` (an Event) is set; reconnects with capped, jittered backoff. With a
    ``replica`` (a cluster hub) every node's registrar consumes, one active at a time, and
    the records go through ``bridge.hub.state`` (:mod:`bridgecli.hub.state_replica`);
    ``node_requests``: also node enrolments (the hub machine's registrar)."""
    import pika
    import pika.exceptions
    import tenacity

    from bridgecli.amqp.connection import open_blocking

    def connect() -> Any:
        params = pika.URLParameters(uri)
        params.heartbeat = 30
        params.client_properties = {"connection_name": name, "product": "bridgecli"}
        return open_blocking(params)

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
            _declare(connection, channel, cluster=replica is not None, node_requests=node_requests)
            linked = None
            if replica is not None:  # records first: the reconcile below grants from them
                state = connection.channel()
                state.confirm_delivery()
                replica.declare(state)
                replica.listen(connection.channel())
                replica.start(state)
                linked = (replica, state)
            channel.basic_qos(prefetch_count=16)
            channel.basic_consume(
                QUEUE,
                functools.partial(_answer, registrar, linked),
                exclusive=replica is None,  # quorum queues refuse it: one consumer is active
            )
            if node_requests:
                channel.basic_consume(NODE_QUEUE, functools.partial(_answer, registrar, linked), exclusive=True)
            registrar.reconcile()
            logger.info("registrar serving")
            last_sweep = last_sync = time.monotonic()
            while not should_stop.is_set():
                connection.process_data_events(time_limit=0.5)
                registrar.drop_due()
                if linked is not None and time.monotonic() - last_sync >= 1.0:
                    linked[0].sync(linked[1])
                    last_sync = time.monotonic()
                if time.monotonic() - last_sweep > sweep_every:
                    if linked is not None:  # grants from the newest records only
                        linked[0].sync(linked[1])
                    registrar.reconcile()
                    last_sweep = time.monotonic()
        except (pika.exceptions.AMQPError, OSError, BridgeError) as exc:
            logger.warning("registrar connection lost: %s", exc)
            should_stop.wait(0.5)
        except Exception:  # a failed sweep (the disk, a bug): log it, reconnect, go on
            logger.exception("registrar loop failed")
            should_stop.wait(2.0)
        finally:
            try:
                if connection.is_open:
                    connection.close()
            except (pika.exceptions.AMQPError, OSError):  # closing a lost connection: logged above
                pass
