"""The control plane, requester side: send a spawn/stop request to a host's gateway and wait
for its answer on a private reply queue.

Fail fast, never hang: the caller checks the roster for a live gateway on the target host
first; the request is mandatory (no ``control.<host>`` queue → unknown host at once) and
carries an expiration equal to our wait, so it cannot run after we gave up.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from bridgecli.amqp import topology
from bridgecli.config import Config
from bridgecli.errors import NotFound, Timeout

#: what the requester waits on top of the readiness gate (queueing, launcher start, answer)
ANSWER_SLACK = 15.0
#: the readiness gate assumed before the target gateway says which one it applies
DEFAULT_READY_TIMEOUT = 30.0


def requester_identity(registry: Any, sender: str | None, host: str) -> dict[str, Any]:
    """Who asks (carried in spawn/stop requests and logged by the target gateway):
    ``--from`` / ``BRIDGE_GID`` as gid and label when it is registered on this host, else
    as given, plus this host."""
    import os

    from bridgecli import messaging
    from bridgecli.envelope import is_uuid

    raw = sender or os.environ.get("BRIDGE_GID")
    try:
        identity = messaging.sender_identity(registry, raw)
        return {"gid": identity.gid, "label": identity.label, "host": host}
    except Exception:  # unknown here: still say who claimed to ask
        if raw and is_uuid(raw.lower()):
            return {"gid": raw.lower(), "label": None, "host": host}
        return {"gid": None, "label": raw or None, "host": host}


def spawn(
    config: Config,
    *,
    profile: str,
    host: str,
    label: str | None,
    wait_ready: float | None,
    requester: dict[str, Any],
    prompt: str | None = None,
) -> dict[str, Any]:
    """Ask ``host`` to spawn ``profile`` (with a first ``prompt``, if any). Without
    ``wait_ready`` the target gateway applies the profile's ``ready_timeout`` (default 30 s)
    and tells us so before it launches."""
    payload = {"type": "spawn", "profile": profile, "label": label, "waitReady": wait_ready, "requester": requester}
    if prompt:
        payload["prompt"] = prompt
    return request(config, host, payload, timeout=(wait_ready or DEFAULT_READY_TIMEOUT) + ANSWER_SLACK)


def request(config: Config, host: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Publish ``payload`` to ``control.<host>`` and return the gateway's answer (raises the
    typed error the gateway sent back). An interim ``{"accepted": true, "waitReady": S}``
    from the gateway moves the deadline to S seconds (its readiness gate) plus slack. Under
    the sender check only an answer published by ``host``'s own broker user counts: anyone
    may publish under a reply key."""
    import pika

    from bridgecli.amqp import connection as amqp_conn
    from bridgecli.amqp.connection import connect
    from bridgecli.amqp.publisher import Publisher
    from bridgecli.error_wire import from_wire as error_from_wire
    from bridgecli.errors import Rejected
    from bridgecli.gateway.identity import IdentityPolicy

    policy = IdentityPolicy.from_config(config.values)
    connection = connect(config, name="bridge-control", heartbeat=0)
    try:
        channel = topology.ensure_shared(
            connection.channel, config.values["messaging.inbox_queue_type"], joined=bool(config.values.get("hub.id"))
        )
        # the answer comes through bridge.ctl under this queue's key (no default exchange),
        # which the broker lets only this host bind
        reply = topology.reply_queue(config.host_id)
        topology.declare(channel, reply)
        reply_key = reply.bindings[0].routing_key
        correlation = str(uuid.uuid4())
        publisher = Publisher(connection.channel(), user_id=amqp_conn.username(config))
        props = pika.BasicProperties(
            reply_to=reply_key,
            correlation_id=correlation,
            content_type="application/json",
            expiration=str(int(max(timeout, 1) * 1000)),
            user_id=publisher.user_id,
        )
        try:
            publisher.publish_raw(
                topology.CONTROL,
                host,
                json.dumps({"v": 1, **payload}).encode(),
                props,
                what=f"{payload['type']} request",
            )
        except Rejected:
            raise NotFound(
                f"no gateway has ever served host {host!r}",
                "check the host id with `bridge roster` (hosts are listed there)",
            ) from None
        deadline = time.monotonic() + timeout
        for method, rprops, body in channel.consume(reply.name, auto_ack=True, inactivity_timeout=0.5):
            if method is not None and rprops.correlation_id == correlation and policy.speaks_for(rprops.user_id, host):
                try:
                    answer = json.loads(body)
                except (ValueError, RecursionError):
                    answer = None
                if not isinstance(answer, dict):
                    continue
                if answer.get("accepted"):
                    deadline = time.monotonic() + float(answer.get("waitReady") or 0) + ANSWER_SLACK
                    timeout = deadline - time.monotonic()
                    continue
                if not answer.get("ok"):
                    raise error_from_wire(answer.get("error") or {})
                answer.pop("ok", None)
                return answer
            if time.monotonic() > deadline:
                raise Timeout(
                    f"gateway {host} did not answer the {payload['type']} request within {timeout:g}s",
                    f"check the gateway log on {host}; a readiness gate may need a longer --wait-ready",
                )
        raise Timeout("the reply queue was closed", "retry")
    finally:
        if connection.is_open:
            connection.close()


def ask_roster_sync(channel: Any, config: Config, on_frame: Any) -> None:
    """Ask every gateway for its full roster frame (a ``sync`` frame on ``bridge.roster``),
    answered on a new reply queue of this host that ``on_frame`` consumes on ``channel`` (a
    pika BlockingChannel): between full frames gateways send only what changed."""
    import pika

    from bridgecli import roster_frames
    from bridgecli.amqp.connection import username
    from bridgecli.roster import GATEWAY_KEY, routing_key

    replies = topology.reply_queue(config.host_id)
    topology.declare(channel, replies)
    channel.basic_consume(replies.name, on_frame, True)
    sync = roster_frames.sync_frame(host=config.host_id, reply=replies.bindings[0].routing_key)
    props = pika.BasicProperties(delivery_mode=1, user_id=username(config))
    channel.basic_publish(topology.ROSTER, routing_key(config.host_id, GATEWAY_KEY), sync, props)


def listen_roster(config: Config, seconds: float):
    """Build a roster view without a local gateway: listen on ``bridge.roster`` for
    ``seconds`` (one heartbeat interval is enough to hear every live gateway), having asked
    every gateway for its full frame (a ``sync`` request: between full frames a gateway sends
    only what changed). Frames are judged as a gateway judges them, with this host's identity
    policy."""
    from bridgecli.amqp.connection import connect
    from bridgecli.gateway.identity import IdentityPolicy
    from bridgecli.roster import RosterView

    view = RosterView(
        config.values["roster.expiry_missed"],
        policy=IdentityPolicy.from_config(config.values),
        local_host=config.host_id,
    )
    connection = connect(config, name="bridge-roster", heartbeat=0)
    try:
        channel = topology.ensure_shared(
            connection.channel, config.values["messaging.inbox_queue_type"], joined=bool(config.values.get("hub.id"))
        )
        # client-named (some brokers refuse server-named queues), under this host's own prefix,
        # which a joined host's user may declare
        name = f"bridge.listen.{config.host_id}.{uuid.uuid4()}"
        channel.queue_declare(name, exclusive=True, auto_delete=True)
        channel.queue_bind(name, topology.ROSTER, routing_key="roster.#")

        def apply(_channel: Any, method: Any, props: Any, body: bytes) -> None:
            view.apply_delivery(method, props, body)

        channel.basic_consume(name, apply, True)
        ask_roster_sync(channel, config, apply)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            connection.process_data_events(time_limit=min(0.2, max(0.0, deadline - time.monotonic())))
    finally:
        if connection.is_open:
            connection.close()
    return view


def require_live_host(view: Any, host: str) -> None:
    if not view.host_alive(host):
        known = ", ".join(g.host for g in view.gateways()) or "none"
        raise NotFound(
            f"no live gateway on host {host!r} (live: {known})",
            f"start `bridge gateway` on {host}, or check the host id",
        )
