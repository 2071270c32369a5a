"""The hub registrar's Prometheus metrics (setting ``hub.metrics``), on a registry of their own.

:class:`RegistrarMetrics` counts what a :class:`~bridgecli.hub.registrar.Registrar` reports
(:class:`~bridgecli.hub.registrar_events.RegistrarEvents`); :func:`start` serves them with the
gateway's :class:`~bridgecli.metrics_http.MetricsServer`. The list, with each metric's
meaning: docs/operators.md.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Gauge

from bridgecli.hub.registrar_events import REQUEST_KINDS, RegistrarEvents
from bridgecli.metrics_http import MetricsServer

#: every ``outcome`` label (see :func:`bridgecli.hub.registrar_events.outcome_of`)
OUTCOMES = ("granted", "refused", "rate_limited", "failed")


class RegistrarMetrics(RegistrarEvents):
    """The registrar's counters and its gauge of known hosts, on :attr:`registry` (not the
    process-wide default registry). Every request kind and outcome starts at 0."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._requests = Counter(
            "bridge_registrar_requests",
            "Registrar requests answered, by op and outcome.",
            ("kind", "outcome"),
            registry=r,
        )
        for kind in (*REQUEST_KINDS, "unknown"):
            for outcome in OUTCOMES:
                self._requests.labels(kind, outcome)
        self._grants = Counter(
            "bridge_registrar_grants_applied", "Times a host's broker permissions were set.", registry=r
        )
        self._enrolled = Counter("bridge_registrar_hosts_enrolled", "Hosts that joined with an invite.", registry=r)
        self._hosts = Gauge("bridge_registrar_hosts", "Joined hosts the hub knows (revoked ones not).", registry=r)

    def request(self, kind: str, outcome: str) -> None:
        self._requests.labels(kind, outcome).inc()

    def grants_applied(self) -> None:
        self._grants.inc()

    def enrolled(self) -> None:
        self._enrolled.inc()

    def hosts_known(self, count: int) -> None:
        self._hosts.set(count)


def start(address: str, logger: logging.Logger) -> tuple[RegistrarMetrics, MetricsServer]:
    """Bind ``address`` (raises :class:`~bridgecli.errors.MetricsAddressError` when malformed
    or taken), then serve a fresh :class:`RegistrarMetrics` on it from a thread of its own."""
    import prometheus_client

    prometheus_client.disable_created_metrics()  # the process is the registrar's own
    metrics = RegistrarMetrics()
    server = MetricsServer(address, metrics.registry, logger=logger)
    server.start()
    return metrics, server
