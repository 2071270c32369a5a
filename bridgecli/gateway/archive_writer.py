"""The gateway's writes to the message archive, on a thread of their own (docs/history.md).

The loop thread and the API threads queue what local entities sent (at the broker's confirm)
and received (at delivery); the writer thread gathers for 20 ms and archives that in one
transaction. Why: archiving is a convenience, so it may never delay or endanger a delivery —
the queue is bounded (a full queue drops and counts), a failed write is logged and counted
and never retried, and a corrupt file is set aside by the archive itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from bridgecli.envelope import Envelope
from bridgecli.gateway import log as glog
from bridgecli.gateway.gathering import GatheringWriter
from bridgecli.hoststate.archive import RECEIVED, SENT, Archive, storable

logger = logging.getLogger("bridgecli.gateway")
#: most messages waiting for the writer; more are dropped (and counted)
MAX_QUEUED = 20_000
#: a failed write is logged at most this often (seconds); every one is counted
LOG_EVERY = 60.0
#: how often the archive is pruned to ``history.keep`` and ``history.max_bytes`` (seconds)
PRUNE_EVERY = 600.0
#: the counters ``bridge status`` shows
COUNTERS = ("archived", "failed", "dropped", "set_aside")

#: one queued message: (direction, owner gid, envelope, when it was queued)
Item = tuple[str, str, Envelope, float]


class ArchiveWriter(GatheringWriter[Item]):
    """Queues messages for ``archive`` and writes them on its thread; with ``archive`` None
    (``history.enabled`` off, or a file that could not be opened) every call does nothing."""

    def __init__(self, archive: Archive | None, keep: float = 30 * 86400.0, max_bytes: int = 256 << 20) -> None:
        super().__init__("message-archive", max_queued=MAX_QUEUED)
        self.archive = archive
        self.keep = keep
        self.max_bytes = max_bytes
        self.counts = dict.fromkeys(COUNTERS, 0)
        self._logged_at = 0.0
        if archive is not None:
            self.start()

    @property
    def enabled(self) -> bool:
        return self.archive is not None

    # --- queueing (any thread; never waits) ------------------------------------------------

    def received(self, pairs: Iterable[tuple[str, Envelope]]) -> None:
        """Local entities received these ``(recipient gid, envelope)`` (delivered or held)."""
        if self.archive is not None:
            now = time.time()
            items = [(RECEIVED, gid, envelope, now) for gid, envelope in pairs]
            if items:
                self._queue(items)

    def sent_when_confirmed(self, envelopes: list[Envelope], confirms: list[Future]) -> None:
        """Archive each of ``envelopes`` as sent once its confirm in ``confirms`` succeeds."""
        if self.archive is None:
            return
        for envelope, confirm in zip(envelopes, confirms, strict=True):
            confirm.add_done_callback(self._on_confirm(envelope))

    def _on_confirm(self, envelope: Envelope) -> Callable[[Future], None]:
        def done(future: Future) -> None:
            if not future.cancelled() and future.exception() is None:
                self._queue([(SENT, envelope.sender, envelope, time.time())])

        return done

    def _queue(self, items: list[Item]) -> None:
        dropped = self._put(items)
        if dropped:
            with self._cond:
                self.counts["dropped"] += dropped

    def prune(self) -> None:
        """Ask the writer's thread to prune (a periodic job of the loop: it only asks)."""
        if self.archive is not None:
            self._ask_job()

    def settle(self, timeout: float = 2.0) -> bool:
        """Wait until what was queued before this call is written (True), at most ``timeout``:
        a reader then sees the message it just sent."""
        return self.archive is None or super().settle(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then end the thread."""
        super().close(timeout)
        if self.archive is not None:
            self.archive.close()

    def status_line(self) -> str:
        if self.archive is None:
            return "off"
        counts = {**self.counts, "set_aside": self.archive.set_aside}
        return (
            f"archived {counts['archived']}; failed {counts['failed']}, dropped {counts['dropped']}, "
            f"set aside {counts['set_aside']}"
        )

    # --- the writer's thread ---------------------------------------------------------------

    def _write(self, batch: list[Item]) -> None:
        assert self.archive is not None
        try:
            added = self.archive.add([row_of(*item) for item in batch])
        except Exception as exc:  # a full disk, a locked file: history is lost, never a delivery
            self.counts["failed"] += len(batch)
            self._log_failure("message archive write failed", exc, len(batch))
            return None
        self.counts["archived"] += added
        return None

    def _job(self) -> None:
        self._prune()

    def _prune(self) -> None:
        assert self.archive is not None
        try:
            gone = self.archive.prune(self.keep, self.max_bytes)
        except Exception as exc:  # retried at the next prune
            self._log_failure("message archive prune failed", exc, 0)
            return
        if gone:
            glog.event(logger, "message archive pruned", rows=gone)

    def _log_failure(self, message: str, exc: Exception, count: int) -> None:
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY or not self._logged_at:
            self._logged_at = now
            glog.event(
                logger, message, logging.ERROR, messages=count, failed=self.counts["failed"], error=f"{exc}"[:200]
            )


def row_of(direction: str, owner: str, envelope: Envelope, archived_at: float) -> dict[str, Any]:
    """One archive row for ``envelope`` as ``owner`` sent or received it (text SQLite cannot
    store, a lone surrogate, becomes U+FFFD: one hostile message never fails a batch)."""
    return {
        "msg_id": envelope.msg_id,
        "copy_of": envelope.copy_of,
        "direction": direction,
        "owner": owner,
        "sender": envelope.sender,
        "sender_label": None if envelope.sender_label is None else storable(envelope.sender_label),
        "sender_host": None if envelope.sender_host is None else storable(envelope.sender_host),
        "recipient": envelope.recipient,
        "channel": envelope.channel,
        "kind": envelope.kind,
        "in_reply_to": envelope.in_reply_to,
        "turn": None if envelope.turn is None else storable(envelope.turn),
        "content": storable(envelope.content),
        "ts": envelope.ts,
        "archived_at": archived_at,
        "user_id": None if envelope.user_id is None else storable(envelope.user_id),
    }


def build(gw: Any) -> ArchiveWriter:
    """The :class:`ArchiveWriter` of gateway ``gw``, wired in: ``archive.db`` beside the store
    unless ``history.enabled`` is off, pruned periodically, its line in ``bridge status``,
    closed when the gateway stops. A file that cannot be opened at all leaves history off."""
    values = gw.config.values
    archive = None
    if values["history.enabled"]:
        try:
            archive = Archive(gw.store.path.parent / "archive.db", on_set_aside=_log_set_aside)
        except Exception as exc:  # an unreadable path: the gateway runs without history
            glog.event(logger, "message archive unavailable; history is off", logging.ERROR, error=f"{exc}"[:200])
    writer = ArchiveWriter(archive, float(values["history.keep"]), int(values["history.max_bytes"]))
    if archive is not None:
        writer.prune()  # once at start: a gateway that never runs 10 minutes still keeps its cap
        gw.add_periodic(PRUNE_EVERY, writer.prune)
    gw.add_status("archive", writer.status_line)
    gw.on_stop_hooks.append(writer.close)
    return writer


def _log_set_aside(aside: Path, error: str) -> None:
    glog.event(
        logger,
        "message archive was corrupt; set aside, starting a fresh one",
        logging.ERROR,
        aside=aside.name,
        error=error[:200],
    )
