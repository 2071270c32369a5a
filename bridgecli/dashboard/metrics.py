"""The dashboard's own Prometheus metrics, served at ``GET /metrics`` of its loopback server.

Counts only, under bounded labels (no gid, host or content): connected event-stream
clients, the updates the stream sent by part, the messages tapped by kind, the collector's
rounds and failures, and the broker connection. On a registry of their own (not the
process-wide one). The list: docs/operators.md.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from bridgecli.envelope import KINDS

#: the parts of an event-stream update (``/api/events``)
PARTS = ("state", "receipts", "traffic", "rates")
#: the ``kind`` label of a tapped body that is no valid envelope
INVALID = "invalid"


class DashboardMetrics:
    """The dashboard's counters and gauges on :attr:`registry`; ``connected()`` says whether
    the broker feed is connected (read at each scrape). Thread-safe."""

    def __init__(self, connected: Callable[[], bool] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._clients = Gauge("bridge_dashboard_stream_clients", "Pages connected to the event stream.", registry=r)
        self._updates = Counter(
            "bridge_dashboard_stream_updates",
            "Event-stream updates sent, by the part they carry.",
            ("part",),
            registry=r,
        )
        self._tapped = Counter(
            "bridge_dashboard_messages_tapped", "Messages the dashboard's tap saw, by kind.", ("kind",), registry=r
        )
        self._rounds = Counter("bridge_dashboard_collections", "Collector rounds (local gateway, DLQ).", registry=r)
        self._failures = Counter("bridge_dashboard_collection_failures", "Collector rounds that failed.", registry=r)
        for part in PARTS:
            self._updates.labels(part)
        for kind in (*KINDS, INVALID):
            self._tapped.labels(kind)
        if connected is not None:
            broker = Gauge("bridge_dashboard_broker_connected", "1 while the tap's connection is up.", registry=r)
            broker.set_function(lambda: float(connected()))

    def stream_opened(self) -> None:
        self._clients.inc()

    def stream_closed(self) -> None:
        self._clients.dec()

    def update_sent(self, parts: list[str]) -> None:
        """One update sent carrying ``parts`` (each one of :data:`PARTS`)."""
        for part in parts:
            self._updates.labels(part).inc()

    def tapped(self, kind: str | None) -> None:
        """One tapped message of ``kind`` (None or unknown: an invalid body)."""
        self._tapped.labels(kind if kind in KINDS else INVALID).inc()

    def collected(self, ok: bool) -> None:
        """One collector round, failed unless ``ok``."""
        self._rounds.inc()
        if not ok:
            self._failures.inc()

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)
