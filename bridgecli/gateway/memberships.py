"""Channel memberships of local entities: the registry's record and the broker's bindings
kept in step, and the change announced on the roster.

A member's inbox is bound to ``bridge.msg`` under the channel's key
(:func:`bridgecli.amqp.topology.channel_binding`). The registry is the record: every attach
of an inbox binds its channels again, so memberships survive gateway and broker restarts.
Binds run on a side channel: a refusal (403 from a hub whose grants predate channels) closes
only that channel, never the one that consumes the inboxes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import pika.exceptions

from bridgecli.amqp import topology
from bridgecli.errors import BrokerUnavailable, NotAMember, PermissionProblem
from bridgecli.gateway import log as glog
from bridgecli.hoststate.entities import Registry
from bridgecli.interfaces import Entity

logger = logging.getLogger("bridgecli.gateway")
T = TypeVar("T")
#: how long one bind or unbind may wait for the broker (seconds)
BIND_TIMEOUT = 10.0


def bind(connection: Any, gid: str, names: Iterable[str], *, unbind: bool = False) -> None:
    """Bind (or unbind) ``gid``'s inbox to channels ``names``, on a side channel of
    ``connection`` (I/O thread). A refusal raises :class:`PermissionProblem` with the fix."""
    side = connection.sync_channel(BIND_TIMEOUT, "channel binding")
    inbox = topology.inbox_name(gid)
    try:
        for name in names:
            binding = topology.channel_binding(name)
            call = side.queue_unbind if unbind else side.queue_bind
            call(inbox, binding.exchange, routing_key=binding.routing_key)
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code == 403:
            raise PermissionProblem(
                f"the broker refused to bind inbox {inbox} to a channel ({exc.reply_text})",
                "the hub's grants predate channels: upgrade bridge on the hub and run `bridge hub start`",
            ) from None
        raise BrokerUnavailable(f"binding {inbox} to a channel failed ({exc.reply_text})", "retry") from None
    finally:
        if side.is_open:
            side.close()


class Memberships:
    """Joins and leaves of local entities (any thread that may wait).

    ``on_io_thread(fn)`` runs ``fn`` on the I/O thread and returns its result;
    ``connection()`` is the consuming connection there; ``announce(entity)`` puts the
    entity's new channels on the roster."""

    def __init__(
        self,
        registry: Registry,
        on_io_thread: Callable[[Callable[[], Any]], Any],
        connection: Callable[[], Any],
        announce: Callable[[Entity], None],
    ) -> None:
        self.registry = registry
        self.on_io_thread = on_io_thread
        self.connection = connection
        self.announce = announce

    def join(self, entity: Entity, name: str) -> bool:
        """Make ``entity`` a member of channel ``name`` (bound now); False when it already
        was. Nothing is recorded when the broker refuses the binding."""
        joined = self.registry.join(name, entity.gid)
        try:
            self.on_io_thread(lambda: bind(self._connected(), entity.gid, [name]))
        except BaseException:
            if joined:
                self.registry.leave(name, entity.gid)
            raise
        if joined:
            glog.event(logger, "joined channel", entity=entity.label, channel=name)
            self.announce(entity)
        return joined

    def leave(self, entity: Entity, name: str) -> None:
        """End ``entity``'s membership of channel ``name``: no copy reaches it from now on."""
        if not self.registry.leave(name, entity.gid):
            raise NotAMember(
                f"{entity.label} is not in channel #{name}",
                f"see `bridge channel list {name}`; it lists every member on every host",
            )
        self.on_io_thread(lambda: bind(self._connected(), entity.gid, [name], unbind=True))
        glog.event(logger, "left channel", entity=entity.label, channel=name)
        self.announce(entity)

    def rebind(self, entity: Entity) -> None:
        """Bind ``entity``'s inbox to each of its channels again (I/O thread, after its inbox
        was declared): a refusal is logged, and the inbox keeps serving its direct messages."""
        names = self.registry.channels_of(entity.gid)
        if not names:
            return
        try:
            bind(self._connected(), entity.gid, names)
        except (PermissionProblem, BrokerUnavailable) as exc:
            glog.event(logger, "channel bindings refused", logging.WARNING, entity=entity.label, error=str(exc))

    def _connected(self) -> Any:
        connection = self.connection()
        if connection is None:
            raise BrokerUnavailable("the gateway is not connected to the broker right now", "retry in a moment")
        return connection
