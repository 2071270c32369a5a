"""``bridge gateway``: run this host's gateway in the foreground."""

from __future__ import annotations

import logging

import click


@click.command()
@click.option(
    "--log-format",
    type=click.Choice(["human", "json"]),
    default=None,
    help="Log lines for humans or JSON (config gateway.log_format, env BRIDGE_GATEWAY_LOG_FORMAT).",
)
@click.option(
    "--metrics",
    "metrics_address",
    metavar="ADDR",
    default=None,
    help="Serve /metrics and /healthz on PORT or HOST:PORT (loopback unless a host is given; "
    "config gateway.metrics, env BRIDGE_GATEWAY_METRICS).",
)
@click.pass_obj
def gateway(app, log_format: str | None, metrics_address: str | None) -> None:
    """Run this host's gateway (blocking consumer loop).

    The gateway is the only AMQP client of its host: it consumes the inboxes of the
    entities registered here, delivers through their backends (acking only once delivered),
    publishes for local senders, and serves the local socket that makes one-shot commands
    fast. Run it in tmux or under a service manager; Ctrl-C / SIGTERM stop it cleanly.
    With --metrics it also serves Prometheus metrics and a health check (docs/operators.md).
    """
    import sys

    from bridgecli.gateway import log as glog
    from bridgecli.gateway.api.server import LocalApi
    from bridgecli.gateway.daemon import Gateway
    from bridgecli.gateway.events import NO_EVENTS

    # the I/O thread, delivery workers and socket clients hand work to each other: a short
    # GIL switch interval keeps each hand-off from waiting out the default 5 ms slice
    sys.setswitchinterval(0.0005)
    config = app.config
    glog.setup(log_format or config.values["gateway.log_format"], host=config.host_id)
    address = metrics_address or config.values["gateway.metrics"]
    metrics = server = None
    if address:  # bound before anything is consumed: a bad address stops the start here
        import prometheus_client

        from bridgecli.gateway.metrics import GatewayMetrics, gateway_health
        from bridgecli.hoststate.entities import open_registry
        from bridgecli.metrics_http import MetricsServer

        # no `_created` series: the process is the gateway's own, its start time is its counters'
        prometheus_client.disable_created_metrics()
        registry = open_registry()
        metrics = GatewayMetrics(registry)
        server = MetricsServer(
            address, metrics.registry, lambda: gateway_health(gw), logging.getLogger("bridgecli.gateway")
        )
        gw = Gateway(config, registry=registry, events=metrics)
    else:
        gw = Gateway(config)
    try:
        from bridgecli.gateway.presence import install as install_presence
    except ImportError:
        pass
    else:
        install_presence(gw)
    gw.add_service(LocalApi(gw, gw.stepper, events=metrics or NO_EVENTS))  # the API sees the gateway's contract only
    if metrics is not None and server is not None:
        from bridgecli.gateway.metrics import StateCollector

        metrics.registry.register(StateCollector(gw))
        gw.on_connect_hooks.append(metrics.connected)
        gw.add_service(server)
    gw.run()
