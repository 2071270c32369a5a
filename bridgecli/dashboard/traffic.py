"""Tapped traffic kept for the page: a bounded history and per-host rates.

Bounded on purpose: at 1,000 msg/s the page shows the newest messages and the counters, and
memory stays flat however long the dashboard runs.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

#: characters of content sent with each row; the full text is fetched when a row is opened
PREVIEW_CHARS = 160
#: kinds of throughput counted per host
SERIES = ("sent", "delivered", "dead")


class Rates:
    """Events per second per (host, series) for the last ``window`` seconds."""

    def __init__(self, window: int = 180, clock: Callable[[], float] = time.time) -> None:
        self.window = window
        self._clock = clock
        self._buckets: dict[tuple[str, str], deque[list[int]]] = {}
        self._lock = threading.Lock()

    def count(self, host: str, series: str, n: int = 1) -> None:
        second = int(self._clock())
        with self._lock:
            buckets = self._buckets.setdefault((host, series), deque(maxlen=self.window))
            if buckets and buckets[-1][0] == second:
                buckets[-1][1] += n
            else:
                buckets.append([second, n])

    def series(self) -> dict[str, dict[str, list[int]]]:
        """host -> series -> counts per completed second, oldest first (``window`` values)."""
        last = int(self._clock()) - 1  # the current second is still filling
        first = last - self.window + 1
        out: dict[str, dict[str, list[int]]] = {}
        with self._lock:
            items = [(key, list(buckets)) for key, buckets in self._buckets.items()]
        for (host, name), buckets in items:
            values = [0] * self.window
            for second, n in buckets:
                if first <= second <= last:
                    values[second - first] = n
            out.setdefault(host, {s: [0] * self.window for s in SERIES})[name] = values
        return out


class Traffic:
    """The newest ``history`` tapped messages in arrival order, each with a sequence number,
    plus :class:`Rates`. Thread-safe: the broker feed adds, web requests read."""

    def __init__(self, history: int = 2000, rates: Rates | None = None) -> None:
        self._rows: deque[dict[str, Any]] = deque(maxlen=history)
        self._by_id: dict[str, dict[str, Any]] = {}
        self._seq = 0
        self._lock = threading.Lock()
        self.rates = rates or Rates()

    def add(self, row: dict[str, Any], sender_host: str | None, recipient_host: str | None) -> None:
        """Record one tapped row (see :func:`bridgecli.amqp.tap.row`) and count it as sent by
        ``sender_host`` and delivered to ``recipient_host`` (each when known)."""
        with self._lock:
            self._seq += 1
            row = dict(
                row,
                seq=self._seq,
                seen=time.time(),
                size=len(row.get("content") or row.get("body") or ""),
                toHost=recipient_host,
            )
            if len(self._rows) == self._rows.maxlen:
                old = self._rows[0]
                old_id = old.get("msgId")
                if old_id is not None and self._by_id.get(old_id) is old:
                    del self._by_id[old_id]
            self._rows.append(row)
            if row.get("msgId"):
                self._by_id[row["msgId"]] = row
        if sender_host:
            self.rates.count(sender_host, "sent")
        if recipient_host:
            self.rates.count(recipient_host, "delivered")

    @property
    def last_seq(self) -> int:
        with self._lock:
            return self._seq

    def since(self, seq: int, limit: int = 300) -> tuple[list[dict[str, Any]], int, int]:
        """Rows after ``seq`` as previews (newest ``limit`` of them), the last sequence
        number, and how many newer rows were skipped to stay within ``limit``."""
        with self._lock:
            last = self._seq
            fresh = list(itertools.takewhile(lambda r: r["seq"] > seq, reversed(self._rows)))
        skipped = max(0, last - seq - min(len(fresh), limit))
        return [_preview(r) for r in reversed(fresh[:limit])], last, skipped

    def get(self, msg_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._by_id.get(msg_id)

    def thread(self, msg_id: str) -> list[dict[str, Any]]:
        """The conversation ``msg_id`` belongs to, oldest first: its ``inReplyTo`` ancestors,
        itself, and every kept message that replies (transitively) to any of them."""
        with self._lock:
            start = self._by_id.get(msg_id)
            if start is None:
                return []
            root = start
            seen = {root["msgId"]}
            while root.get("inReplyTo") in self._by_id and root["inReplyTo"] not in seen:
                root = self._by_id[root["inReplyTo"]]
                seen.add(root["msgId"])
            members = {root["msgId"]}
            for row in self._rows:  # arrival order: a reply arrives after what it answers
                if row.get("inReplyTo") in members and row.get("msgId"):
                    members.add(row["msgId"])
            return [_preview(r) for r in self._rows if r.get("msgId") in members]


def _preview(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for key in ("content", "body"):
        text = out.get(key)
        if isinstance(text, str) and len(text) > PREVIEW_CHARS:
            out[key] = text[:PREVIEW_CHARS]
            out["truncated"] = True
    return out
