"""``bridge broker``: the embedded RabbitMQ node of this user."""

from __future__ import annotations

import time

import click

from bridgecli.cli import output


@click.group()
def broker() -> None:
    """Run a private local RabbitMQ node for this user.

    The node is Debian's rabbitmq-server started as a plain process (no systemd) with its
    data under the user data dir (XDG_DATA_HOME/bridge/broker). It listens on 127.0.0.1 only,
    on 5672 when free, else on a free port. While it runs, every command uses it when no
    broker.uri / BRIDGE_BROKER_URI is configured.
    """


@broker.command()
@click.option(
    "--timeout",
    type=float,
    default=90.0,
    show_default=True,
    help="Seconds to wait for the node to accept AMQP connections.",
)
@output.json_option
@click.pass_obj
def start(app, timeout: float, as_json: bool) -> None:
    """Start the node and wait until it accepts connections; prints its URI.

    On a machine that is a hub (`bridge hub start` ran and `bridge hub stop` did not), the
    node comes back as the hub, with its TLS listener and registrar. On a cluster node's
    machine (`bridge join --node` ran) it comes back as that node and rejoins the cluster.
    """
    from bridgecli import localbroker
    from bridgecli.errors import ConfigError
    from bridgecli.hub import layout, node_join

    if layout.is_active_hub():
        from bridgecli.hub import lifecycle

        lifecycle.start(app.config, [], [], timeout)
        output.note("bridge: this machine is a hub: started it with its TLS listener and registrar")
    result = None if layout.is_active_hub() else node_join.start_saved(timeout)
    if result is not None:
        output.note("bridge: this machine is a cluster node: started it with its saved cluster settings")
    else:
        result = localbroker.start(timeout, host=app.config.host_id)
    info = result.info
    if as_json:
        output.data(
            {
                "uri": info.uri,
                "pid": info.pid,
                "node": info.nodename,
                "already_running": result.already_running,
                "seconds": round(result.seconds, 2),
                "changes": result.changes,
            }
        )
    else:
        output.line(info.uri)
    if result.changes:
        output.note(f"bridge: secured the broker: {'; '.join(result.changes)}")
    if result.already_running:
        output.note(f"bridge: broker already running (node {info.nodename}, pid {info.pid})")
    else:
        output.note(
            f"bridge: started RabbitMQ node {info.nodename} (pid {info.pid}) in "
            f"{result.seconds:.1f}s; commands use it while broker.uri is unset"
        )
    try:
        configured = app.config.values.get("broker.uri")
    except ConfigError:
        configured = None
    if configured:
        source = app.config.sources.get("broker.uri")
        output.warn(f"broker.uri is set ({source}), so commands use that broker, not this node")


@broker.command()
@output.json_option
def stop(as_json: bool) -> None:
    """Stop the node cleanly (no process is left behind)."""
    from bridgecli import localbroker
    from bridgecli.hub import node_registrar

    began = time.monotonic()
    node_registrar.stop()  # a cluster node machine's registrar (none elsewhere)
    info = localbroker.stop()
    if as_json:
        output.data(
            {
                "stopped": info is not None,
                "node": info.nodename if info else None,
                "seconds": round(time.monotonic() - began, 2),
            }
        )
    if info is None:
        output.note("bridge: broker is not running")
    else:
        output.note(f"bridge: stopped RabbitMQ node {info.nodename}")


@broker.command()
@output.json_option
def status(as_json: bool) -> None:
    """Show whether the node runs, its URI, pid and data directory.

    Exit code 0 either way; scripts read `running` from --json.
    """
    from bridgecli import localbroker

    state = localbroker.status()
    if as_json:
        output.data(state)
        return
    if not state["running"]:
        output.line("stopped")
        output.note(f"bridge: no embedded broker runs (data dir {state['dir']}); start it with `bridge broker start`")
        return
    output.line("running" if state["accepting"] else "running (not accepting connections)")
    output.table(["FIELD", "VALUE"], [(k, state[k]) for k in ("uri", "node", "pid", "dir")])


@broker.command()
@click.option("-n", "--lines", type=int, default=50, show_default=True, help="How many lines.")
@output.json_option
def logs(lines: int, as_json: bool) -> None:
    """Print the end of the node's log file."""
    from bridgecli import localbroker

    path = localbroker.log_path()
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:] if lines > 0 else []
    except FileNotFoundError:
        from bridgecli.errors import NotFound

        raise NotFound(f"no broker log at {path}", "start the broker with `bridge broker start`") from None
    if as_json:
        output.data({"path": str(path), "lines": text})
        return
    for line in text:
        output.line(line)


@broker.command("migrate-queues")
@click.option(
    "--to",
    "queue_type",
    type=click.Choice(["quorum", "classic"]),
    default="quorum",
    show_default=True,
    help="The queue type to move to.",
)
@click.option("--dry-run", is_flag=True, help="Only list what would move; change nothing.")
@output.json_option
@click.pass_obj
def migrate_queues(app, queue_type: str, dry_run: bool, as_json: bool) -> None:
    """Rebuild bridge.dlq, control.<host> and the inboxes in another queue type, keeping every message.

    RabbitMQ cannot change a queue's type in place: each queue's messages move to a temporary
    <name>.migrating, the queue is declared again with the new type and they move back, in
    order, with every property (a foreign user_id needs an impersonator, as the embedded
    broker's admin is). Stop the gateways first: a queue with consumers is refused (exit 13).
    A run that died midway is finished by the next. Afterwards set
    messaging.inbox_queue_type to the new type.
    """
    from bridgecli import queue_migration

    rows = queue_migration.run(app.config, queue_type, dry_run=dry_run)
    if as_json:
        output.data({"dry_run": dry_run, "to": queue_type, "queues": rows})
    else:
        for row in rows:
            found = row["from"] or "leftover"
            count = row["messages"] if dry_run else row["moved"]
            verb = "would move" if dry_run else "moved"
            output.line(f"{row['queue']} {found} -> {row['to']}: {verb} {count} messages")
    if not rows:
        output.note(f"bridge: every bridge queue already is {queue_type}")
    configured = app.config.values.get("messaging.inbox_queue_type")
    if configured != queue_type and not dry_run:
        output.note(
            f"bridge: now set the queue type the gateway declares: "
            f"`bridge config set messaging.inbox_queue_type {queue_type}` (it is {configured})"
        )
