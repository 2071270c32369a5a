"""The gateway's Prometheus metrics (``bridge gateway --metrics``), on a registry of their own.

:class:`GatewayMetrics` counts the events a gateway reports (:class:`.events.GatewayEvents`);
:class:`StateCollector` reads what is true right now (held messages, the broker connection,
the roster) from the gateway at each scrape. Label names are the JSON log's field names
(``backend``, ``kind``, ``host``). The list, with each metric's meaning: docs/operators.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bridgecli import __version__, health
from bridgecli.envelope import Envelope
from bridgecli.gateway.events import GatewayEvents
from bridgecli.interfaces import Entity

#: delivery latency buckets (seconds): an inline hold is a millisecond, a busy pane seconds
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: the ``backend`` label of a message whose entity is not registered on this host
NO_BACKEND = "none"


class EntityLookup(Protocol):
    """The host's entity registry (``hoststate.entities.Registry``)."""

    def get(self, gid: str) -> Entity | None: ...


class GatewayMetrics(GatewayEvents):
    """Counters and the latency histogram of one gateway, on :attr:`registry` (not the
    process-wide default registry). ``entities`` names the backend of a sender or of a
    dead-lettered inbox's entity. Thread-safe, as the events' callers need."""

    def __init__(self, entities: EntityLookup) -> None:
        self.entities = entities
        self.registry = CollectorRegistry(auto_describe=True)
        by = ("backend", "kind")
        r = self.registry
        self._sent = Counter("bridge_messages_sent", "Messages of local senders the broker confirmed.", by, registry=r)
        self._delivered = Counter(
            "bridge_messages_delivered", "Messages handed to a local entity (held ones too).", by, registry=r
        )
        self._dead = Counter(
            "bridge_messages_dead_lettered",
            "Messages moved to the dead-letter queue, by reason.",
            (*by, "reason"),
            registry=r,
        )
        self._dedup = Counter(
            "bridge_messages_deduplicated", "Repeats of a message already taken, dropped.", by, registry=r
        )
        self._retried = Counter("bridge_messages_retried", "Failed deliveries to be tried again.", by, registry=r)
        self._latency = Histogram(
            "bridge_delivery_latency_seconds",
            "From the sender's timestamp to the delivery (clocks of two hosts: skew counts).",
            ("backend",),
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self._connects = Counter(
            "bridge_broker_reconnects", "Times the consuming connection connected again after the first.", registry=r
        )
        self._requests = Counter("bridge_api_requests", "Requests on the local API's socket.", ("op",), registry=r)
        self._errors = Counter(
            "bridge_api_errors", "Error answers of the local API, by exit-code name.", ("code",), registry=r
        )
        self._children: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()
        self._first_connect = True

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, kept: the library's own lookup costs a lock each time."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            with self._lock:
                child = self._children.setdefault(key, metric.labels(*labels))
        return child

    def _backend_of(self, gid: str | None) -> str:
        entity = self.entities.get(gid) if gid else None
        return entity.backend if entity is not None else NO_BACKEND

    def sent(self, envelope: Envelope) -> None:
        self._child(self._sent, self._backend_of(envelope.sender), envelope.kind).inc()

    def delivered(self, entity: Entity, envelope: Envelope) -> None:
        backend = entity.backend
        self._child(self._delivered, backend, envelope.kind).inc()
        self._child(self._latency, backend).observe(max(0.0, time.time() - envelope.ts))

    def dead_lettered(self, queue: str, props: Any, reason: str) -> None:
        gid = queue[len("agent.") : -len(".inbox")] if queue.startswith("agent.") and queue.endswith(".inbox") else None
        kind = str(getattr(props, "type", None) or "unknown")
        self._child(self._dead, self._backend_of(gid), kind, reason).inc()

    def deduplicated(self, entity: Entity, envelope: Envelope) -> None:
        self._child(self._dedup, entity.backend, envelope.kind).inc()

    def retried(self, entity: Entity, envelope: Envelope) -> None:
        self._child(self._retried, entity.backend, envelope.kind).inc()

    def connected(self) -> None:
        if self._first_connect:
            self._first_connect = False
        else:
            self._connects.inc()

    def api_request(self, op: str) -> None:
        self._child(self._requests, op).inc()

    def api_error(self, code: str) -> None:
        self._child(self._errors, code).inc()


class StateSource(Protocol):
    """What :class:`StateCollector` reads of the gateway (``Gateway`` implements it)."""

    host: str
    store: Any  #: ``held_count()``, ``oldest_held()``
    registry: Any  #: ``all()``
    roster: Any  #: a ``RosterView`` (``entries()``, ``gateways()``, ``hosts()``), or None

    def is_connected(self) -> bool: ...
    def can_publish(self) -> bool: ...
    def consuming(self, gid: str) -> bool: ...


class StateCollector(Collector):
    """The gauges read from ``source`` at each scrape: held messages and the oldest one's
    age, the broker connections, local entities and consumed inboxes, the roster's size and
    staleness, and the gateway's host and version."""

    def __init__(self, source: StateSource) -> None:
        self.source = source

    def describe(self) -> list[Metric]:
        return []  # no fixed description: the registry then never collects at registration

    def collect(self) -> Iterator[Metric]:
        src = self.source
        now = time.time()
        info = GaugeMetricFamily(
            "bridge_gateway_info", "This gateway's host id and version.", labels=("host", "version")
        )
        info.add_metric([src.host, __version__], 1)
        yield info
        yield _gauge("bridge_messages_held", "Messages held for a local pull (hold inboxes).", src.store.held_count())
        oldest = src.store.oldest_held()
        yield _gauge(
            "bridge_held_oldest_age_seconds",
            "Age of the oldest held message (0 when none is held).",
            max(0.0, now - oldest) if oldest is not None else 0.0,
        )
        yield _gauge("bridge_broker_connected", "1 while the consuming connection is up.", int(src.is_connected()))
        yield _gauge("bridge_publish_lane_connected", "1 while the publish lane is up.", int(src.can_publish()))
        entities = src.registry.all()
        yield _gauge("bridge_entities", "Entities registered on this host.", len(entities))
        consumed = sum(1 for e in entities if src.consuming(e.gid))
        yield _gauge("bridge_inboxes_consumed", "Local inboxes this gateway consumes.", consumed)
        roster = src.roster
        entries = len(roster.entries()) if roster is not None else 0
        yield _gauge("bridge_roster_entities", "Entities of the whole fleet in this gateway's roster.", entries)
        yield _gauge(
            "bridge_roster_gateways",
            "Gateways in this gateway's roster.",
            len(roster.gateways()) if roster is not None else 0,
        )
        ages = [float(row.get("age") or 0.0) for row in roster.hosts(now)] if roster is not None else []
        yield _gauge(
            "bridge_roster_age_seconds",
            "Seconds since the stalest host's last roster frame (0 before any).",
            max(ages, default=0.0),
        )


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def gateway_health(gw: Any) -> list[health.Check]:
    """The ``/healthz`` checks of gateway ``gw`` (a ``Gateway``), from the fields its
    ``status`` answer carries, read without the I/O thread."""
    try:
        elsewhere = gw.consumed_by_others()
    except RuntimeError:  # changed while read: the I/O thread owns it; the next scrape sees it
        elsewhere = []
    status = {
        "broker": {"connected": gw.is_connected(), "publishing": gw.can_publish()},
        "elsewhere": elsewhere,
        "entities": [{"label": e.label, "gid": e.gid, "consuming": gw.consuming(e.gid)} for e in gw.registry.all()],
    }
    return health.gateway_checks(status)
