"""Move bridge's durable queues to another queue type (classic <-> quorum), losing no message.

RabbitMQ cannot change a queue's type in place, so each queue ``N`` is rebuilt through a
temporary ``N.migrating`` of the target type: its messages move there, ``N`` is deleted and
declared again with the target type, and they move back. Moves take a message only after
the broker confirmed its copy (at least once: a crash may leave a copy in both queues; the
gateway drops repeats by message id). A run that died midway is finished by the next one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import pika
import pika.exceptions

from bridgecli.amqp import topology
from bridgecli.errors import BrokerUnavailable, Conflict, PermissionProblem

TEMP_SUFFIX = ".migrating"
QUEUE_TYPES = ("quorum", "classic")
#: unacknowledged messages a move holds at once
PREFETCH = 200
#: seconds a move waits for one more message before it asks whether the queue is empty
IDLE = 0.1
#: how often a queue that keeps receiving messages is drained again before deleting it
DELETE_ATTEMPTS = 20


@dataclass(frozen=True)
class Step:
    """One queue to migrate: ``target`` is its final form (arguments of the target type and
    every binding to restore); ``current`` the type found ("unknown": neither form bridge
    declares; None: only a leftover ``N.migrating`` remains); ``rebuild``: the queue itself
    is not in its final form yet; ``messages`` what it and its leftover hold now."""

    target: topology.Queue
    current: str | None
    messages: int
    consumers: int
    leftover: bool
    rebuild: bool = True

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def temp(self) -> str:
        return temp_name(self.name)


def temp_name(name: str) -> str:
    return f"{name}{TEMP_SUFFIX}"


def final_queue(name: str, queue_type: str, max_attempts: int = 5) -> topology.Queue | None:
    """The topology of bridge queue ``name`` in ``queue_type`` (None: not a queue this command
    migrates). Roster, reply and relay queues are transient or exclusive: they are left alone."""
    if name == topology.DLQ:
        return topology.dead_letter_queue(queue_type)
    match = re.fullmatch(r"control\.([^.]+)", name)
    if match:
        return topology.control_queue(match.group(1), queue_type)
    match = re.fullmatch(r"agent\.([^.]+)\.inbox", name)
    if match:
        return topology.inbox_queue(match.group(1), queue_type, max_attempts)
    return None


def base_names(names: Iterable[str]) -> list[str]:
    """The bridge queues ``names`` stand for (a leftover ``N.migrating`` stands for ``N``),
    sorted, each once."""
    found = {n[: -len(TEMP_SUFFIX)] if n.endswith(TEMP_SUFFIX) else n for n in names}
    return sorted(n for n in found if final_queue(n, "classic") is not None)


def other_type(queue_type: str) -> str:
    return "classic" if queue_type == "quorum" else "quorum"


class Migrator:
    """Plans and runs migrations on one blocking ``connection`` as broker user ``user``.

    Every broker call gets a channel of its own: a refusal closes only that one.
    """

    def __init__(self, connection: Any, queue_type: str, max_attempts: int = 5, user: str | None = None) -> None:
        if queue_type not in QUEUE_TYPES:
            raise ValueError(f"unknown queue type {queue_type!r}")
        self.connection = connection
        self.queue_type = queue_type
        self.max_attempts = max_attempts
        self.user = user

    # --- planning ------------------------------------------------------------------------
    def plan(
        self,
        names: Iterable[str],
        types: dict[str, str] | None = None,
        bindings: dict[str, list[topology.Binding]] | None = None,
    ) -> list[Step]:
        """The steps for ``names`` (bridge queues or leftovers) not yet in the target type.

        ``types``: each queue's type as the management API reports it; without it the type
        is found by declaring the queue in each form. ``bindings``: bindings to restore beyond
        the topology's own (channel memberships)."""
        steps = []
        for name in base_names(names):
            final = final_queue(name, self.queue_type, self.max_attempts)
            assert final is not None
            extra = [b for b in (bindings or {}).get(name, []) if b not in final.bindings]
            final = replace(final, bindings=(*final.bindings, *extra))
            found, left = self.counts(name), self.counts(temp_name(name))
            if found is None and left is None:
                continue
            current = None
            if found is not None:
                current = (types or {}).get(name) or self._probe_type(final)
            rebuild = found is not None and not (current == self.queue_type and self._declares(final))
            if not rebuild and left is None:
                continue
            messages = sum(c[0] for c in (found, left) if c is not None)
            consumers = sum(c[1] for c in (found, left) if c is not None)
            steps.append(Step(final, current, messages, consumers, left is not None, rebuild))
        return steps

    def counts(self, name: str) -> tuple[int, int] | None:
        """(ready messages, consumers) of queue ``name``; None when it does not exist."""
        channel = self.connection.channel()
        try:
            ok = channel.queue_declare(name, passive=True).method
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code == 404:
                return None
            raise
        channel.close()
        return ok.message_count, ok.consumer_count

    def _declares(self, queue: topology.Queue) -> bool:
        """Whether declaring ``queue`` (no bindings) succeeds: the queue has its arguments."""
        channel = self.connection.channel()
        try:
            topology.declare(channel, replace(queue, bindings=()))
        except Conflict:
            return False
        channel.close()
        return True

    def _probe_type(self, final: topology.Queue) -> str:
        """The type of existing queue ``final.name``, from which of bridge's two forms of it
        declares without a conflict; "unknown" when neither does (e.g. an older bridge's)."""
        if self._declares(final):
            return self.queue_type
        source = final_queue(final.name, other_type(self.queue_type), self.max_attempts)
        assert source is not None
        if self._declares(source):
            return source.arguments.get("x-queue-type", "classic")
        return "unknown"

    @staticmethod
    def refuse_consumed(steps: Iterable[Step]) -> None:
        """Conflict naming every step's queue that a client consumes (a running gateway)."""
        busy = [s.name for s in steps if s.consumers]
        if busy:
            hosts = sorted({_owner(n) for n in busy})
            raise Conflict(
                f"{', '.join(busy)} {'has' if len(busy) == 1 else 'have'} consumers (a gateway is running)",
                f"stop the gateway of {', '.join(hosts)} first (`bridge gateway stop` there), then rerun",
            )

    # --- running -------------------------------------------------------------------------
    def migrate(self, step: Step) -> int:
        """Rebuild ``step``'s queue in the target type; the number of messages that moved
        into the final queue. Resumes from whatever a run that died left behind."""
        temp = replace(step.target, name=step.temp, bindings=())
        if step.rebuild:
            self._declare(temp)
            self.move(step.name, step.temp)
            self._swap_bindings(step.target.bindings, step.name, step.temp)
            self._delete_drained(step.name, step.temp, step.current)
        self._declare(replace(step.target, bindings=()))
        moved = self.move(step.temp, step.name)
        self._swap_bindings(step.target.bindings, step.temp, step.name)
        return moved + self._delete_drained(step.temp, step.name, self.queue_type)

    def _declare(self, queue: topology.Queue) -> None:
        channel = self.connection.channel()
        topology.declare(channel, queue)
        channel.close()

    def _swap_bindings(self, bindings: Iterable[topology.Binding], old: str, new: str) -> None:
        """Bind ``new`` before unbinding ``old``: a message published in between reaches
        both (a repeat the gateway drops), never neither."""
        channel = self.connection.channel()
        for b in bindings:
            channel.queue_bind(new, b.exchange, routing_key=b.routing_key, arguments=b.arguments or None)
        for b in bindings:
            channel.queue_unbind(old, b.exchange, routing_key=b.routing_key, arguments=b.arguments or None)
        channel.close()

    def _delete_drained(self, name: str, into: str, queue_type: str | None) -> int:
        """Move what is left in ``name`` (of ``queue_type``) into ``into`` and delete ``name``
        once it is empty; the number of messages moved. Quorum queues refuse ``if-empty``
        deletes, so any other is deleted right after it was found empty (unbound by then)."""
        moved = 0
        for _ in range(DELETE_ATTEMPTS):
            moved += self.move(name, into)
            channel = self.connection.channel()
            try:
                if queue_type == "classic":
                    channel.queue_delete(name, if_empty=True)
                elif self.counts(name) in (None, (0, 0)):
                    lost = channel.queue_delete(name).method.message_count
                    if lost:
                        raise BrokerUnavailable(
                            f"{lost} messages reached {name} directly while it was being deleted, and are gone",
                            "publish to bridge's queues through their exchanges only",
                        )
                else:
                    continue
            except pika.exceptions.ChannelClosedByBroker as exc:
                if exc.reply_code == 406:  # not empty: a message arrived meanwhile
                    continue
                if exc.reply_code == 404:
                    return moved
                raise
            channel.close()
            return moved
        raise BrokerUnavailable(
            f"queue {name} kept receiving messages, so it could not be deleted",
            f"stop what publishes to it directly (its bindings moved to {into}) and rerun",
        )

    def move(self, source: str, dest: str) -> int:
        """Move every message of ``source`` to ``dest`` through the default exchange, in
        order, with its body and every property; each is acked off ``source`` only after the
        broker confirmed its copy. Stops when ``source`` is empty; the number moved."""
        taker = self.connection.channel()
        taker.basic_qos(prefetch_count=PREFETCH)
        giver = self.connection.channel()
        giver.confirm_delivery()
        moved = 0
        try:
            for method, props, body in taker.consume(source, inactivity_timeout=IDLE):
                if method is None:
                    found = self.counts(source)
                    if found is None or found[0] == 0:
                        break
                    if found[1] > 1:
                        raise Conflict(
                            f"another client consumes {source} while it is being migrated",
                            f"stop the gateway of {_owner(source)} (`bridge gateway stop`) and rerun",
                        )
                    continue
                self._publish(giver, source, dest, props, body)
                taker.basic_ack(method.delivery_tag)
                moved += 1
        finally:
            for channel in (taker, giver):
                if channel.is_open:
                    channel.close()  # what was not acked goes back to source, in place
        return moved

    def _publish(self, channel: Any, source: str, dest: str, props: Any, body: bytes) -> None:
        try:
            channel.basic_publish("", dest, body, props, mandatory=True)
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code == 406 and props.user_id and props.user_id != self.user:
                raise PermissionProblem(
                    f"a message in {source} was published by broker user {props.user_id!r}, and only "
                    "an impersonator may publish it again as that user (nothing was lost)",
                    "rerun on the hub machine or with the embedded broker, whose admin may; or give "
                    "this broker user RabbitMQ's impersonator tag",
                ) from None
            raise
        except (pika.exceptions.UnroutableError, pika.exceptions.NackError):
            raise BrokerUnavailable(
                f"the broker did not take a message moved from {source} to {dest} (it stays in {source})",
                "rerun `bridge broker migrate-queues`: it resumes",
            ) from None


def _owner(name: str) -> str:
    """Who consumes queue ``name``: ``host X`` for ``control.X``, else a description."""
    base = name[: -len(TEMP_SUFFIX)] if name.endswith(TEMP_SUFFIX) else name
    if base.startswith("control."):
        return f"host {base.split('.', 1)[1]}"
    if base.startswith("agent."):
        return f"the host of inbox {base}"
    return "every host"


def admin_inventory(admin: Any) -> tuple[list[str], dict[str, str], dict[str, list[topology.Binding]]]:
    """(names, types, bindings) of the bridge queues the management API ``admin`` lists:
    durable, non-exclusive ones only, and for each its bindings but the default exchange's."""
    names: list[str] = []
    types: dict[str, str] = {}
    bindings: dict[str, list[topology.Binding]] = {}
    for queue in admin.queues():
        name = queue.get("name") or ""
        if queue.get("exclusive") or queue.get("auto_delete") or not base_names([name]):
            continue
        names.append(name)
        if not name.endswith(TEMP_SUFFIX):
            types[name] = queue.get("type") or "classic"
        base = base_names([name])[0]
        for row in admin.queue_bindings(name):
            if row.get("source"):
                binding = topology.Binding(row["source"], row.get("routing_key", ""), dict(row.get("arguments") or {}))
                if binding not in bindings.setdefault(base, []):
                    bindings[base].append(binding)
    return names, types, bindings


def local_inventory(host: str, registry: Any) -> tuple[list[str], dict[str, list[topology.Binding]]]:
    """(names, bindings) of the bridge queues this host knows of without the management API:
    ``bridge.dlq``, ``control.<host>`` and the inboxes of its registry's entities, with their
    channel bindings."""
    names = [topology.DLQ, f"control.{host}"]
    bindings: dict[str, list[topology.Binding]] = {}
    for entity in registry.all():
        inbox = topology.inbox_name(entity.gid)
        names.append(inbox)
        bindings[inbox] = [topology.channel_binding(c) for c in registry.channels_of(entity.gid)]
    return names, bindings


def run(config: Any, queue_type: str, *, dry_run: bool = False) -> list[dict[str, Any]]:
    """Migrate every bridge queue the broker of ``config`` holds in another type than
    ``queue_type`` (``dry_run``: only list them); one row per queue (``queue``, ``from``,
    ``to``, ``messages``, ``consumers``, ``moved``). Refuses, changing nothing, while a gateway consumes one.

    Uses the embedded node's admin and management API when commands use that node (every
    queue of every host; an impersonator), else the configured user and this host's queues.
    """
    from bridgecli import dead_letter_queue, localbroker
    from bridgecli.amqp import connection as amqp_conn

    uris = dead_letter_queue.operator_uris(config)
    user = localbroker.uri_user(uris[0]) if uris else amqp_conn.username(config)
    types: dict[str, str] | None = None
    info = None if uris is None else localbroker.read_state()
    if info is not None and info.management_port:
        from bridgecli.hub.rabbitadmin import RabbitAdmin

        names, types, bindings = admin_inventory(RabbitAdmin(info.management_port))
    else:
        from bridgecli.hoststate.entities import open_registry

        names, bindings = local_inventory(config.host_id, open_registry())
    connection = amqp_conn.connect(config, name="bridge-migrate-queues", heartbeat=0, uris=uris)
    try:
        migrator = Migrator(connection, queue_type, config.values["messaging.max_attempts"], user)
        steps = migrator.plan(names, types, bindings)
        if not dry_run:
            migrator.refuse_consumed(steps)
        rows = []
        for step in steps:
            moved = None if dry_run else migrator.migrate(step)
            rows.append(
                {
                    "queue": step.name,
                    "from": step.current,
                    "to": queue_type,
                    "messages": step.messages,
                    "consumers": step.consumers,
                    "moved": moved,
                }
            )
        return rows
    finally:
        if connection.is_open:
            connection.close()
