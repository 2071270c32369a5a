"""Wires the presence plane and the control plane into a gateway (docs/design.md#invariant-8).

Presence: a :class:`~bridgecli.roster.RosterView` fed by
:mod:`bridgecli.gateway.roster_listener`; one host frame every ``roster.interval`` seconds
through the publish lane (:mod:`bridgecli.gateway.host_beats`: full or delta), plus per-entity
heartbeats while a gateway that speaks only those was heard; a ``sync`` request on (re)connect,
answered on our reply key; ``gone`` on unregister and clean stop. Other hosts are heard
through a roster relay or directly (:mod:`bridgecli.gateway.roster_feed`). Statuses
(the backend's, or ``gone`` for a spawned entity whose process ended) are computed on a side
thread: a tmux or herdr query may take milliseconds.

Control: see :mod:`bridgecli.gateway.control`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import pika

from bridgecli import __version__, cache, roster_frames
from bridgecli import roster as roster_mod
from bridgecli.amqp import connection as amqp_conn
from bridgecli.amqp import topology
from bridgecli.gateway import log as glog
from bridgecli.gateway import roster_listener
from bridgecli.gateway.host_beats import HostBeats
from bridgecli.gateway.identity import IdentityPolicy
from bridgecli.gateway.roster_feed import RelayWatch
from bridgecli.gateway.roster_listener import RosterListener
from bridgecli.interfaces import DeliveryBackend, Entity, LaunchHandle

logger = logging.getLogger("bridgecli.gateway")


class PresenceHost(Protocol):
    """What presence needs of the gateway (implemented by ``Gateway``)."""

    config: Any
    host: str
    registry: Any
    plugins: Any
    #: the publish lane: ``ready`` and ``send_soft``
    lane: Any
    started: float
    on_connect_hooks: list[Callable[[], None]]
    on_entity_added: list[Callable[[Entity], None]]
    on_entity_removed: list[Callable[[Entity, str], None]]
    on_stop_hooks: list[Callable[[], None]]
    #: what agents' hooks report they are doing (``activity_of(gid)``)
    tracking: Any

    def add_periodic(self, interval: float, fn: Callable[[], None]) -> None: ...

    def add_status(self, name: str, line: Callable[[], Any]) -> None: ...

    def use_roster(self, view: roster_mod.RosterView) -> None: ...

    def roster_heard(self, within: float) -> None: ...

    def backend_for(self, entity: Entity) -> DeliveryBackend: ...


class Presence:
    """Heartbeats out, union view in."""

    def __init__(self, gw: PresenceHost) -> None:
        self.gw = gw
        self.interval: float = gw.config.values["roster.interval"]
        self.view = roster_mod.RosterView(
            gw.config.values["roster.expiry_missed"],
            policy=IdentityPolicy.from_config(gw.config.values),
            local_host=getattr(gw, "host", None),
            on_sync=self._sync_asked,
            on_epoch=lambda relay, epoch: self.watch.epoch(relay, epoch) if self.watch else None,
        )
        self.host_beats = HostBeats(getattr(gw, "host", "?"), __version__, self.interval)
        #: when to send our own sync request (monotonic; None: none pending), and whether the
        #: listener connected before (a reconnect's request is jittered)
        self._sync_due: float | None = None
        #: the hosts a sync request names (None: all), and how we hear other hosts (install())
        self._sync_hosts: list[str] | None = None
        self.watch: RelayWatch | None = None
        self._listened = False
        self.answered = 0
        #: held from building a broadcast frame to handing it to the lane, so frames go out in
        #: sequence order (a new entity's delta is sent from another thread than the tick)
        self._frame_lock = threading.Lock()
        #: the broker user our frames name as ``user_id`` (the broker checks it), once known
        self._user_id: str | None = None
        self.statuses: dict[str, str] = {}
        self.sent = 0
        self._next_due = 0.0
        self._saved_changes, self._saved_at = -1, -1e9
        self.received = 0
        self._status_stop = threading.Event()
        self._launchers: dict[str, object] = {}
        #: consumes roster.<host> on a connection and thread of its own, in batches (install())
        self.listener: _FrameListener | None = None
        self._status_thread = threading.Thread(target=self._status_loop, name="presence-status", daemon=True)

    # wiring ------------------------------------------------------------------------------

    def install(self) -> None:
        gw = self.gw
        gw.use_roster(self.view)
        gw.on_connect_hooks.append(self.on_connect)
        gw.on_entity_added.append(lambda entity: self.heartbeat_one(entity))
        gw.on_entity_removed.append(lambda entity, reason: self.announce_gone(entity.gid, reason))
        gw.on_stop_hooks.append(self.on_stop)
        gw.add_periodic(min(0.25, self.interval / 4), self._tick)
        gw.add_periodic(min(1.0, self.interval / 2), self.expire)
        gw.add_status(
            "roster",
            lambda: (
                f"{len(self.view.entries())} entities on "
                f"{len(self.view.gateways())} gateways; "
                f"frames sent {self.sent}, received {self.received}, sync answers sent {self.answered}"
                + (f"; per-entity frames too, for {', '.join(old)}" if (old := self._old_peers()) else "")
                + ("" if self.listener and self.listener.connected.is_set() else "; roster listener not connected")
            ),
        )
        # a growing count says some host sends frames it may not (docs/roster.md)
        gw.add_status("roster_refused", self.view.refused_frames)
        self._status_thread.start()
        relay = gw.config.values.get("roster.relay", "auto")
        self.listener = _FrameListener(gw.config, gw.host, self._on_delivery, on_connected=self._listening, relay=relay)
        self.watch = RelayWatch(relay, self.interval, self.view, self.listener, self._ask, self.host_beats.want_full)
        # feed, relay name, epoch, age of its last frame, and the relay's refusal counts
        gw.add_status("roster_relay", self.watch.info)

    def on_connect(self) -> None:
        self.view.use_policy(IdentityPolicy.from_config(self.gw.config.values))  # re-read at connect
        # the listener binds to bridge.roster, which the gateway's first connect declares:
        # started before that, a gateway on a fresh broker logged a frightening 404 retry
        first = self.listener is not None and not self.listener.is_started()
        if first and self.listener is not None:
            self.listener.start()
        # after a reconnect, first heartbeats after a random part of one interval: when a
        # broker restarts, every gateway reconnects in the same second, and a synchronised
        # announce burst can push the broker into a backlog it never recovers from
        # (docs/roster.md). A gateway that just started announces itself within half a
        # second, so that a send to it right after its start finds it.
        spread = min(0.5, self.interval) if first else min(self.interval, 5.0)
        self._next_due = time.monotonic() + random.uniform(0, spread)
        self.host_beats.want_full()  # frames may have been lost while we were away

    def _tick(self) -> None:
        # due, and the publish lane (which carries heartbeats) is up: a heartbeat due while it
        # connects waits for it rather than being dropped
        now = time.monotonic()
        if now >= self._next_due and self.gw.lane.ready.is_set():
            # keep the schedule (now + interval would drift by each tick's lateness, and
            # three late ticks in a row look like a missed heartbeat to a strict reader);
            # after a long stall (lane down, slow I/O) skip the missed beats, never burst
            self._next_due += self.interval
            if self._next_due <= now:
                self._next_due = now + self.interval
            self.heartbeat_all()
        if self.watch is not None:
            self.watch.tick()
        if self.gw.lane.ready.is_set():
            self._sync_traffic(now)

    def _sync_traffic(self, now: float) -> None:
        """Send our own sync request when due, and the full frames owed to joiners."""
        reply = self.listener.reply_key if self.listener is not None else None
        if self._sync_due is not None and now >= self._sync_due and reply:
            self._sync_due, hosts, self._sync_hosts = None, self._sync_hosts, None
            body = roster_frames.sync_frame(host=self.gw.host, reply=reply, hosts=hosts)
            self._publish_all([(topology.ROSTER, roster_mod.routing_key(self.gw.host, roster_mod.GATEWAY_KEY), body)])
        for key in self.host_beats.due_answers(now):
            self.answered += 1
            self._publish_all([(topology.CONTROL, key, self._host_frame(answer=True))])

    def on_stop(self) -> None:
        self._status_stop.set()
        if self.listener is not None:
            self.listener.stop()
        try:
            # the host's gone retires all its entries, in old and new views alike
            self._publish(
                roster_mod.GATEWAY_KEY,
                roster_mod.gone_frame(host=self.gw.host, gid=roster_mod.GATEWAY_KEY, reason="gateway stopped"),
            )
        except Exception as exc:
            glog.event(logger, "could not announce shutdown", logging.WARNING, error=str(exc))

    # traffic -----------------------------------------------------------------------------

    def _listening(self) -> None:
        """The listener (re)connected: ask every host for its full frame (at once the first
        time, after a random 0..interval/2 on a reconnect, so that a fleet-wide reconnect does
        not ask in one second); a lookup that finds nothing waits one and a half intervals
        from now before calling a target unknown (Gateway.once_roster_complete)."""
        reconnect, self._listened = self._listened, True
        if reconnect and self.watch is not None and not self.watch.whole_view_on_reconnect():
            return  # fed by the relay: the view is intact, digests fetch what changed
        self._sync_hosts = None
        self._sync_due = time.monotonic() + (random.uniform(0, self.interval / 2) if reconnect else 0.0)
        self.gw.roster_heard(within=self.interval * 1.5)

    def _ask(self, hosts: list[str] | None) -> None:
        """Send a sync request for ``hosts`` (None: every host) at the next tick; a pending
        whole-view request stays whole."""
        pending = self._sync_due is not None
        if hosts is None or not pending:
            self._sync_hosts = None if hosts is None else list(hosts)
        elif self._sync_hosts is not None:
            self._sync_hosts = sorted(set(self._sync_hosts) | set(hosts))
        self._sync_due = time.monotonic() if not pending else min(self._sync_due or 0.0, time.monotonic())

    def _sync_asked(self, host: str, reply: str, hosts: list[str] | None) -> None:
        """A gateway joined, or a listener without one (a dashboard, `bridge roster`, maybe on
        this host): owe it our full frame on its reply key (RosterView.on_sync), unless it is
        our own request or asks only about other hosts (those ask the relay)."""
        if hosts is not None and self.gw.host not in hosts:
            return
        if self.listener is None or reply != self.listener.reply_key:
            self.host_beats.owe(host, reply)

    def _old_peers(self) -> list[str]:
        """Hosts that spoke only per-entity frames in the last three intervals."""
        return self.view.old_peers(within=self.interval * 3)

    def _on_delivery(self, method: Any, props: Any, body: bytes) -> None:
        self.received += 1
        self.view.apply_delivery(method, props, body)

    def _publish_all(self, frames: list[tuple[str, str, bytes]]) -> None:
        """Hand (exchange, routing key, body) frames to the gateway's publish lane (never the
        consuming connection; see PublishLane.send_soft). Roster frames are soft state: no confirm wait,
        not persistent, expiring after three intervals, and naming our broker user: under the
        sender check a frame without it speaks for no host."""
        if self._user_id is None:
            self._user_id = amqp_conn.username(self.gw.config)
        props = pika.BasicProperties(
            content_type="application/json",
            delivery_mode=1,
            expiration=str(int(self.interval * 1000 * 3)),
            user_id=self._user_id,
        )
        if self.gw.lane.send_soft([(exchange, key, body, props) for exchange, key, body in frames]):
            self.sent += len(frames)

    def _publish(self, gid: str, body: bytes) -> None:
        self._publish_all([(topology.ROSTER, roster_mod.routing_key(self.gw.host, gid), body)])

    def _host_frame(self, answer: bool = False) -> bytes:
        """Our host frame: the next broadcast one, or a full one to answer a joiner."""
        channels = self.gw.registry.channels()
        items = [
            roster_frames.entity_item(entity, self.statuses.get(entity.gid, "unknown"), channels.get(entity.gid, ()))
            for entity in self.gw.registry.all()
        ]
        build = self.host_beats.answer if answer else self.host_beats.frame
        return build(items, self.gw.config.profiles(), self.gw.started)

    def _heartbeat(self, entity: Entity, channels: dict[str, tuple[str, ...]]) -> tuple[str, bytes]:
        return entity.gid, roster_mod.heartbeat_frame(
            host=self.gw.host,
            version=__version__,
            interval=self.interval,
            entity=entity,
            status=self.statuses.get(entity.gid, "unknown"),
            channels=channels.get(entity.gid, ()),
        )

    def heartbeat_one(self, entity: Entity) -> None:
        """A new entity, or its channels changed: a delta now (and its own heartbeat for
        gateways of the old protocol)."""
        old = self._old_peers()
        with self._frame_lock:
            frames = [(roster_mod.GATEWAY_KEY, self._host_frame())]
            self._send(frames + ([self._heartbeat(entity, self.gw.registry.channels())] if old else []))

    def heartbeat_all(self) -> None:
        """One host frame; while a gateway that speaks only per-entity frames was heard in
        the last three intervals, also one heartbeat per entity and the gateway's own."""
        with self._frame_lock:
            self._send([(roster_mod.GATEWAY_KEY, self._host_frame())])
        if not self._old_peers():
            return
        entities = self.gw.registry.all()
        channels = self.gw.registry.channels()
        frames = [self._heartbeat(entity, channels) for entity in entities]
        gateway = roster_mod.heartbeat_frame(
            host=self.gw.host,
            version=__version__,
            interval=self.interval,
            entities=len(entities),
            profiles=self.gw.config.profiles(),
            started=self.gw.started,
            marked=True,
        )
        self._send([*frames, (roster_mod.GATEWAY_KEY, gateway)])

    def _send(self, frames: list[tuple[str, bytes]]) -> None:
        self._publish_all([(topology.ROSTER, roster_mod.routing_key(self.gw.host, gid), body) for gid, body in frames])

    def announce_gone(self, gid: str, reason: str) -> None:
        self.statuses.pop(gid, None)
        self._publish(gid, roster_mod.gone_frame(host=self.gw.host, gid=gid, reason=reason))

    def expire(self) -> None:
        for entry in self.view.expire():
            glog.event(logger, "roster entry expired", entity=entry.label, host=entry.host, gid=entry.gid)

    # statuses ----------------------------------------------------------------------------

    def _save_cache(self) -> None:
        """Write roster.json for TAB completion — off the I/O thread, only when the view
        changed, at most every max(interval, 2 s): rewriting 2 000 entries on every heartbeat
        was a tenth of a gateway's roster CPU at 50 × 40 (docs/roster.md)."""
        now = time.monotonic()
        if self.view.changes == self._saved_changes or now - self._saved_at < max(self.interval, 2.0):
            return
        self._saved_changes, self._saved_at = self.view.changes, now
        cache.save_roster(self.view)

    def _status_loop(self) -> None:
        while not self._status_stop.wait(self.interval / 2):
            try:
                self._save_cache()
            except Exception as exc:  # a completion cache must never disturb presence
                glog.event(logger, "roster cache not written", logging.WARNING, error=str(exc))
            for entity in self.gw.registry.all():
                self.statuses[entity.gid] = self.status_of(entity)

    def status_of(self, entity: Entity) -> str:
        """The status to announce: ``gone`` for a spawned entity whose launcher says its
        process has ended (a ``hold`` inbox would otherwise look ``idle`` for ever);
        otherwise its delivery backend's."""
        try:
            if entity.launcher:
                launched = self._launcher(entity.launcher).status(
                    LaunchHandle(launcher=entity.launcher, deliver=entity.deliver, data=dict(entity.launch_data))
                )
                if launched == "gone":
                    return launched
            status = self.gw.backend_for(entity).status(entity)
            # what the agent's own hooks last said (working, waiting, idle) beats a guess from
            # its pane, unless the pane is gone
            return status if status == "gone" else self.gw.tracking.activity_of(entity.gid) or status
        except Exception:
            return "unknown"

    def _launcher(self, name: str):
        launcher = self._launchers.get(name)
        if launcher is None:
            launcher = self._launchers[name] = self.gw.plugins.provider("launchers", name)(self.gw.config)
        return launcher


class _FrameListener(RosterListener):
    """A roster listener that hands on each frame's properties too: its ``user_id`` and
    dead-letter headers decide whether the frame counts (RosterView.apply_delivery); it also
    consumes a reply queue of its own (``reply_key``, new at each connect), where other hosts
    answer our sync request with their full frames."""

    def __init__(self, config: Any, host: str, on_delivery: Callable[[Any, Any, bytes], None], **kwargs: Any) -> None:
        super().__init__(config, host, lambda method, body: on_delivery(method, None, body), **kwargs)
        self.on_delivery = on_delivery
        self.reply_key: str | None = None

    def _consume(self, connection: Any) -> None:
        replies = topology.reply_queue(self.host)
        declaring = connection.sync_channel(roster_listener.OPEN_TIMEOUT, "roster sync declare")
        topology.declare(declaring, replies)
        declaring.close()
        channel = connection.channel(roster_listener.OPEN_TIMEOUT, "roster")
        channel.add_on_close_callback(self._on_channel_closed)
        started: list[Any] = []

        def deliver(_ch: Any, method: Any, props: Any, body: bytes) -> None:
            self.on_delivery(method, props, body)

        # first: the broker starts consumers in order, so once the roster consumer below is
        # confirmed this one is in place before our sync request goes out
        channel.basic_consume(replies.name, deliver, auto_ack=True)
        self.reply_key = replies.bindings[0].routing_key
        channel.basic_consume(
            topology.roster_queue(self.host).name,
            deliver,
            auto_ack=True,
            callback=self._on_consuming(connection.arrived(started)),
        )
        connection.wait_for(started, roster_listener.OPEN_TIMEOUT, "the broker did not start the roster consumer")


def install(gw: Any) -> None:
    """Add presence and control to ``gw`` (a ``Gateway``: both a PresenceHost and a
    ControlHost; called by ``bridge gateway``)."""
    from bridgecli.gateway.control import Control

    Presence(gw).install()
    Control(gw).install()
