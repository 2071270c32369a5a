"""``bridge relay``: run a roster relay in the foreground (docs/roster.md#the-roster-relay)."""

from __future__ import annotations

import click


@click.command()
@click.option("--id", "name", default=None, help="The relay's name in its frames (default: this host id).")
@click.option(
    "--every",
    type=click.FloatRange(0.1, 60.0),
    default=1.0,
    show_default=True,
    help="Seconds between two relay frames.",
)
@click.pass_obj
def relay(app, name: str | None, every: float) -> None:
    """Run a roster relay: hear every host's roster frames, publish what changed once a second.

    Consumes bridge.roster.relay (one relay at a time: start a second one elsewhere as a
    standby, the broker feeds it when the first dies) and publishes one frame every
    --every seconds under relay.NAME, so that each gateway hears one relay instead of every
    host. Logs to stderr; Ctrl-C / SIGTERM stop it cleanly.
    """
    import logging
    import signal
    import threading

    from bridgecli.gateway import log as glog
    from bridgecli.relay.service import RelayService
    from bridgecli.roster_frames import safe_name

    config = app.config
    name = name or config.host_id
    if not safe_name(name) or "." in name:
        raise click.BadParameter(f"{name!r}: letters, digits, '-' or '_' only (no dots or spaces)", param_hint="--id")
    # the gateway's log lines (its reconnect warnings are the relay's too), in its format
    handler = glog.setup(config.values["gateway.log_format"]).handlers[0]
    relay_log = logging.getLogger("bridgecli.relay")
    relay_log.handlers, relay_log.propagate = [handler], False
    relay_log.setLevel(logging.INFO)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    RelayService(config, name, every).run(stop)
