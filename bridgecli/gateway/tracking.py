"""Receipts, gateway side: tell each sender's host what became of its messages, and record
what other hosts tell ours (docs/receipts.md).

As the recipient's host, a delivery, a pull, a hook's sighting or a dead letter becomes a
:class:`~bridgecli.receipts.Receipt`: applied to the local ledger for a local sender, else
batched per host into ``RECEIPT`` frames every 50 ms, sent to ``bridge.ctl`` under
the sender host's key. As a sender's host, a frame counts only when published by the broker
user of the host it names, about recipients minted on that host: no host speaks for another
host's entity.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pika

from bridgecli import envelope as env_mod
from bridgecli import gids
from bridgecli import receipts as rc
from bridgecli.amqp import topology
from bridgecli.envelope import Envelope
from bridgecli.gateway import identity
from bridgecli.gateway import log as glog
from bridgecli.gateway.identity import IdentityPolicy
from bridgecli.gateway.ledger_writer import LedgerWriter
from bridgecli.hoststate import ledger as ledger_mod
from bridgecli.hoststate.ledger import Ledger
from bridgecli.interfaces import Delivered

logger = logging.getLogger("bridgecli.gateway")
#: the statuses a hook may report, and what the roster then says (``blocked``: waiting for the user)
ACTIVITY = {"working": "working", "waiting": "blocked", "idle": "idle"}
#: most msgIds one ``seen`` call may name (a prompt quoting a whole log is not a list of reads)
MAX_MARKERS = 64
#: how often gathered receipts are published (seconds): each frame then carries several
#: messages' receipts once the gateway is busy
FLUSH_EVERY = 0.05
#: the counters ``bridge status`` shows
COUNTERS = ("sent", "frames", "recorded", "duplicate", "unknown", "forged", "bad")

Frame = tuple[str, str, bytes, Any]


class Tracking:
    """Receipts in and out for one gateway. ``ledger`` is None when ``receipts.enabled`` is
    off: nothing is recorded or sent then. ``user_id`` gives the broker user frames name (the
    broker checks it). ``send_soft`` publishes frames on the publish lane
    (False when it is down: those receipts are lost, as a roster frame would be); the gateway
    calls :meth:`flush` every :data:`FLUSH_EVERY` seconds; ``roster`` gives the fleet's roster view (None
    before presence runs); ``fail_waits`` ends the ``send --wait`` calls on a dead-lettered message."""

    def __init__(
        self,
        host: str,
        values: dict[str, Any],
        ledger: Ledger | None,
        *,
        user_id: Callable[[], str | None],
        send_soft: Callable[[list[Frame]], bool],
        roster: Callable[[], Any],
        fail_waits: Callable[[str, str], int],
    ) -> None:
        self.host = host
        self.values = values
        self.ledger = ledger
        self.user_id = user_id
        self._user: str | None = None
        self.send_soft = send_soft
        self.roster = roster
        self.fail_waits = fail_waits
        self.keep = float(values.get("receipts.keep") or 7 * 86400)
        self.counts = dict.fromkeys(COUNTERS, 0)
        self._lock = threading.Lock()
        self._outbox: dict[str, list[rc.Receipt]] = {}
        self._activity: dict[str, tuple[str, float]] = {}
        #: every ledger write, in order, off the loop thread
        self.writer = LedgerWriter(ledger, self._applied) if ledger is not None else None

    @property
    def enabled(self) -> bool:
        return self.ledger is not None

    # --- the sender's side: its own messages ---------------------------------------------

    def sending(self, envelopes: list[Envelope]) -> None:
        """Local senders are about to publish ``envelopes``: start their records (none for a
        channel message: its receipts would be per member, which the ledger does not keep)."""
        if self.writer is not None:
            self.writer.track([e for e in envelopes if e.channel is None])

    def confirmed(self, msg_id: str, ok: bool) -> None:
        """The broker confirmed ``msg_id`` (``ok``), or refused it: then it has no record."""
        if self.writer is not None:
            self.writer.sent(msg_id, ok)

    def settle(self) -> None:
        """Wait until the ledger holds every change queued so far (before reading it)."""
        if self.writer is not None:
            self.writer.settle()

    def confirmed_all(self, msg_ids: list[str], ok: bool) -> None:
        """:meth:`confirmed` for each of ``msg_ids``."""
        for msg_id in msg_ids:
            self.confirmed(msg_id, ok)

    # --- the recipient's side: what became of a message ----------------------------------

    def delivered(self, envelope: Envelope, outcome: Delivered) -> None:
        """``envelope`` reached its entity as ``outcome`` says; an outcome with ``read`` is a
        turn that began with it. A member's copy of a channel message sends none."""
        if envelope.copy_of is not None:
            return
        now = time.time()
        items = [rc.Receipt(envelope.msg_id, envelope.recipient, rc.DELIVERED, now, how=outcome.how, ref=outcome.ref)]
        if outcome.read:
            items.append(rc.Receipt(envelope.msg_id, envelope.recipient, rc.READ, now, how="turn", ref=outcome.ref))
        self._emit(envelope.sender_host, items)

    def read(self, messages: list[tuple[str, str, str | None]], how: str) -> None:
        """Local entities pulled these messages, each ``(msgId, recipient gid, sender's
        host)`` (``how``: ``poll``, ``wait``), or their turn began with them (``hook:CLIENT``)."""
        now = time.time()
        for msg_id, recipient, host in messages:
            self._emit(host, [rc.Receipt(msg_id, recipient, rc.READ, now, how=how)])

    def dead_lettered(self, body: bytes, user_id: str | None, reason: str, detail: str) -> None:
        """The gateway dead-lettered the message ``body`` (published by ``user_id``) for
        ``reason``. Only a valid envelope that passes the sender check gets a receipt: a forged
        one gets none, so no receipt can be aimed at a host that sent nothing."""
        if self.ledger is None or reason in ("sender_mismatch", "recipient_mismatch"):
            return
        try:
            envelope = env_mod.parse(body, user_id=user_id)
        except env_mod.InvalidEnvelope:
            return
        if envelope.channel is not None or identity.verify(self.values, envelope, self.roster()):
            return
        text = f"{reason}: {detail}" if detail else reason
        self._emit(
            envelope.sender_host, [rc.Receipt(envelope.msg_id, envelope.recipient, rc.DEAD, time.time(), reason=text)]
        )

    def _emit(self, host: str | None, items: list[rc.Receipt]) -> None:
        if self.ledger is None:
            return
        if not host:
            return  # an old sender names no host: nobody to tell
        if host == self.host:
            for item in items:
                self._apply(item)
            return
        with self._lock:
            self._outbox.setdefault(host, []).extend(items)

    def flush(self) -> None:
        """Publish what was gathered since the last flush: per sender host, frames of up to
        MAX_ITEMS receipts (between the loop's steps)."""
        if not self._outbox:
            return
        with self._lock:
            outbox, self._outbox = self._outbox, {}
        frames: list[Frame] = []
        if self._user is None:
            self._user = self.user_id()  # under the sender check a frame without it speaks for no host
        for host, items in outbox.items():
            for start in range(0, len(items), rc.MAX_ITEMS):
                props = pika.BasicProperties(
                    type=rc.FRAME_TYPE, content_type="application/json", delivery_mode=2, user_id=self._user
                )
                frames.append(
                    (topology.CONTROL, host, rc.encode(self.host, items[start : start + rc.MAX_ITEMS]), props)
                )
        if frames and self.send_soft(frames):
            self.counts["sent"] += sum(len(items) for items in outbox.values())
            self.counts["frames"] += len(frames)

    # --- the sender's side: receipts from other hosts ------------------------------------

    def on_frame(self, user_id: str | None, body: bytes) -> None:
        """Check and record one ``RECEIPT`` frame read from ``control.<host>`` (loop thread)."""
        if self.ledger is None:
            return
        try:
            host, items = rc.decode(body)
        except rc.BadReceipt as exc:
            self._drop("bad", str(exc), user_id)
            return
        if host == self.host or not IdentityPolicy.from_config(self.values).speaks_for(user_id, host):
            self._drop("forged", f"broker user {user_id!r} may not speak for host {host!r}", user_id, len(items))
            return
        for item in items:
            if isinstance(item, rc.BadReceipt):
                self._drop("bad", str(item), user_id)
            elif not (gids.minted_on(item.recipient, host) or self._owner(item.recipient) == host):
                self._drop("forged", f"host {host!r} spoke for {item.recipient}, not its entity", user_id)
            else:
                self._apply(item)

    def _owner(self, gid: str) -> str | None:
        view = self.roster()
        return view.owner(gid) if view is not None else None

    def _apply(self, item: rc.Receipt) -> None:
        assert self.writer is not None
        self.writer.apply(item)

    def _applied(self, item: rc.Receipt, outcome: str) -> None:
        """What the ledger made of ``item`` (the writer's thread, after its commit)."""
        if outcome == ledger_mod.MISMATCH:
            self._drop("forged", f"receipt for {item.msg_id} names another recipient", None)
            return
        self.counts[outcome] += 1
        if outcome == ledger_mod.RECORDED and item.state == rc.DEAD:
            self.fail_waits(item.msg_id, item.reason or "dead-lettered")

    def _drop(self, counter: str, why: str, user_id: str | None, count: int = 1) -> None:
        self.counts[counter] += count
        glog.event(logger, "receipt dropped", logging.WARNING, why=why[:200], user=user_id)

    # --- hooks: sightings and activity ---------------------------------------------------

    def report_activity(self, gid: str, status: str) -> str:
        """An agent's hook says what ``gid`` is doing (a key of :data:`ACTIVITY`); returns the
        roster status it now shows."""
        shown = ACTIVITY[status]
        self._activity[gid] = (shown, time.time())
        return shown

    def activity_of(self, gid: str) -> str | None:
        """The status ``gid``'s hooks last reported, if any."""
        entry = self._activity.get(gid)
        return entry[0] if entry is not None else None

    def forget_activity(self, gid: str) -> None:
        self._activity.pop(gid, None)

    # --- housekeeping --------------------------------------------------------------------

    def prune(self) -> None:
        """Forget records older than ``receipts.keep`` (through the writer's order)."""
        if self.ledger is not None and self.writer is not None:
            self.writer.settle()
            self.ledger.prune(self.keep)

    def close(self) -> None:
        """Send what is gathered and write what is queued (the gateway is stopping)."""
        self.flush()
        if self.writer is not None:
            self.writer.close()

    def status_line(self) -> str:
        if self.ledger is None:
            return "off"
        counts = self.counts
        return (
            f"sent {counts['sent']} in {counts['frames']} frames, recorded {counts['recorded']}; "
            f"dropped: duplicate {counts['duplicate']}, "
            f"unknown {counts['unknown']}, forged {counts['forged']}, bad {counts['bad']}"
        )


def build(gw: Any, lane: Any) -> Tracking:
    """The :class:`Tracking` of gateway ``gw`` (its config, store, roster, waiters), wired in:
    its ledger beside the store's file unless ``receipts.enabled`` is off, frames out on
    ``lane`` (a ``PublishLane``) as this host's broker user, flushed and pruned periodically,
    its line in ``bridge status``, its writer closed when the gateway stops."""
    from bridgecli.amqp import connection as amqp_conn

    config = gw.config
    values = config.values
    ledger = Ledger(gw.store.path.parent / "receipts.db") if values["receipts.enabled"] else None
    tracking = Tracking(
        config.host_id,
        values,
        ledger,
        user_id=lambda: amqp_conn.username(config),
        send_soft=lane.send_soft,
        roster=lambda: gw.roster,
        fail_waits=gw.waiters.fail,
    )
    gw.add_periodic(FLUSH_EVERY, tracking.flush)
    gw.add_periodic(600.0, tracking.prune)
    gw.add_status("receipts", tracking.status_line)
    gw.on_stop_hooks.append(tracking.close)
    return tracking
