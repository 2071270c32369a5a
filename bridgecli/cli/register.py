"""``bridge register`` / ``unregister`` / ``entities``: the entities hosted here."""

from __future__ import annotations

import click

from bridgecli.cli import complete, output


@click.command()
@click.option("--label", "-l", required=True, help="Human name, unique on this host (e.g. reviewer).")
@click.option(
    "--role",
    "-r",
    type=click.Choice(["agent", "main", "orchestrator"]),
    default="agent",
    show_default=True,
    help="agent = typed into; main/orchestrator = pulls (MCP).",
)
@click.option(
    "--deliver",
    "-d",
    required=True,
    metavar="BACKEND[:ADDRESS]",
    help="How messages reach it: hold, exec:COMMAND, tmux:%3, herdr:w1:p2 …",
)
@output.json_option
@click.pass_obj
def register(app, label: str, role: str, deliver: str, as_json: bool) -> None:
    """Register an entity on this host; prints its gid.

    Mints a global id (UUID), stores the entity durably on this host and declares its inbox
    agent.<gid>.inbox. A running gateway starts serving it at once. Export the gid as
    BRIDGE_GID in the entity's environment so its `bridge send/reply` know who is speaking.
    """
    from bridgecli.requests import RegisterRequest
    from bridgecli.session import open_session

    with open_session(lambda: app.config, output.warn) as session:
        entity = session.register(RegisterRequest(label=label, role=role, deliver=deliver)).entity
    if as_json:
        output.data(entity.to_wire())
    else:
        output.line(entity.gid)


@click.command()
@click.argument("target", shell_complete=complete.local_targets)
@output.json_option
@click.pass_obj
def unregister(app, target: str, as_json: bool) -> None:
    """Remove an entity from this host.

    TARGET is a gid, a gid prefix or a label of an entity registered here. Messages still
    in its inbox are moved to bridge.dlq (reason recipient_unregistered), never dropped.
    """
    from bridgecli.requests import UnregisterRequest
    from bridgecli.session import open_session

    with open_session(lambda: app.config, output.warn) as session:
        result = session.unregister(UnregisterRequest(target=target))
    if as_json:
        output.data(result.to_wire())
    else:
        moved = result.dead_lettered
        output.note(
            f"unregistered {result.entity.label} ({result.entity.gid})"
            + (f"; {moved} waiting message(s) moved to bridge.dlq" if moved else "")
        )


@click.command()
@output.json_option
def entities(as_json: bool) -> None:
    """List the entities registered on this host."""
    from bridgecli.gids import short
    from bridgecli.hoststate.entities import open_registry
    from bridgecli.hoststate.store import Store, default_path
    from bridgecli.hoststate.wire import entity_dict

    rows = [entity_dict(e) for e in open_registry().all()]
    if default_path().exists():
        store = Store(default_path())
        for row in rows:
            row["held"] = store.held_count(row["gid"])
    if as_json:
        output.data({"entities": rows})
        return
    output.table(
        ["LABEL", "GID", "ROLE", "DELIVER", "HELD"],
        [(r["label"], short(r["gid"]), r["role"], r["deliver"], r.get("held", 0)) for r in rows],
    )
