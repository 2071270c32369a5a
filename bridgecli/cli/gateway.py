"""``bridge gateway``: run this host's gateway in the foreground."""

from __future__ import annotations

import click


@click.command()
@click.option(
    "--log-format",
    type=click.Choice(["human", "json"]),
    default=None,
    help="Log lines for humans or JSON (config gateway.log_format, env BRIDGE_GATEWAY_LOG_FORMAT).",
)
@click.pass_obj
def gateway(app, log_format: str | None) -> None:
    """Run this host's gateway (blocking consumer loop).

    The gateway is the only AMQP client of its host: it consumes the inboxes of the
    entities registered here, delivers through their backends (acking only once delivered),
    publishes for local senders, and serves the local socket that makes one-shot commands
    fast. Run it in tmux or under a service manager; Ctrl-C / SIGTERM stop it cleanly.
    """
    import sys

    from bridgecli.gateway import log as glog
    from bridgecli.gateway.api.server import LocalApi
    from bridgecli.gateway.daemon import Gateway

    # the I/O thread, delivery workers and socket clients hand work to each other: a short
    # GIL switch interval keeps each hand-off from waiting out the default 5 ms slice
    sys.setswitchinterval(0.0005)
    config = app.config
    glog.setup(log_format or config.values["gateway.log_format"])
    gw = Gateway(config)
    try:
        from bridgecli.gateway.presence import install as install_presence
    except ImportError:
        pass
    else:
        install_presence(gw)
    gw.add_service(LocalApi(gw, gw.stepper))  # the local API sees the gateway through its contract only
    gw.run()
