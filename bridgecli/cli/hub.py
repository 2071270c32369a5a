"""``bridge hub``: make this machine the hub other hosts join, and manage who has joined."""

from __future__ import annotations

import time
from typing import Any

import click

from bridgecli.cli import output
from bridgecli.cli.params import DURATION


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "-"


@click.group()
def hub() -> None:
    """Make this machine the hub that other hosts join.

    The hub is this user's embedded RabbitMQ node (see `bridge broker`) reachable over TLS,
    with a certificate authority of its own and a registrar that gives every joined host its
    own broker user: a tenant that can affect only its own entities, with no operator step
    when it registers or spawns one. Plain AMQP stays on loopback for this machine.

    \b
    On this machine:   bridge hub start --listen 192.0.2.10
                       bridge hub invite buildbox
    On the other one:  bridge join 'bridge-invite:…'  then  bridge gateway
    """


@hub.command()
@click.option(
    "--listen",
    "listen",
    multiple=True,
    metavar="ADDR[:PORT]",
    help="An address of this machine that other hosts reach (amqps, port 5671 unless "
    "taken). Repeatable. Kept for later starts.",
)
@click.option(
    "--name",
    "names",
    multiple=True,
    metavar="DNSNAME",
    help="A DNS name of this machine to put in the server certificate. Repeatable.",
)
@click.option(
    "--timeout", type=float, default=90.0, show_default=True, help="Seconds to wait for the node and the registrar."
)
@click.option(
    "--cluster",
    is_flag=True,
    help="Run the node as the first of a RabbitMQ cluster that other machines join "
    "(`bridge hub invite --node`). An existing hub's node is converted, keeping every user, "
    "queue and message; kept for later starts.",
)
@output.json_option
@click.pass_obj
def start(app, listen: tuple[str, ...], names: tuple[str, ...], timeout: float, cluster: bool, as_json: bool) -> None:
    """Start the hub: the embedded node with a TLS listener, and the registrar.

    Creates the hub's CA and server certificate on first use and keeps them, with every
    joined host's user and grants, across restarts. A plain `bridge broker` node that is
    running is restarted with the hub's listeners.
    """
    from bridgecli.hub import lifecycle

    result = lifecycle.start(app.config, list(listen), list(names), timeout, cluster=cluster)
    settings = result.settings
    if as_json:
        output.data(
            {
                "hub": settings.hub_id,
                "addresses": settings.addresses,
                "ca_fingerprint": result.ca_fingerprint,
                "cluster": settings.cluster,
                "already_running": result.already_running,
                "seconds": round(result.seconds, 2),
                "changes": result.changes,
            }
        )
        return
    if result.summary:
        output.note(f"bridge: {result.summary}")
    for address in settings.addresses:
        output.line(f"amqps://{address}/")
    if result.restarted_plain_broker:
        output.note("bridge: restarted the embedded broker with the hub's TLS listener")
    state = "already running" if result.already_running else f"started in {result.seconds:.1f}s"
    output.note(f"bridge: hub {settings.hub_id} {state}; CA sha256:{result.ca_fingerprint}")
    output.note("bridge: invite a host with `bridge hub invite HOSTID`")


@hub.command()
@output.json_option
def stop(as_json: bool) -> None:
    """Stop the registrar and the node (users, grants and certificates are kept)."""
    from bridgecli.hub import lifecycle

    stopped = lifecycle.stop()
    if as_json:
        output.data({"stopped": stopped})
    output.note("bridge: hub stopped" if stopped else "bridge: no hub is running")


@hub.command()
@output.json_option
def status(as_json: bool) -> None:
    """Show whether the hub runs, its addresses, CA fingerprint, hosts and open invites.

    Exit code 0 either way; scripts read `running` from --json.
    """
    from bridgecli.hub import lifecycle

    state = lifecycle.status()
    if as_json:
        output.data(state)
        return
    if not state["configured"]:
        output.line("not configured")
        output.note("bridge: start a hub with `bridge hub start --listen ADDR`")
        return
    output.line("running" if state["running"] else "stopped")
    registrar = state["registrar"]
    output.table(
        ["FIELD", "VALUE"],
        [
            ("hub", state["hub"]),
            ("addresses", ", ".join(state["addresses"])),
            ("ca", f"sha256:{state['ca_fingerprint']}"),
            ("registrar", f"pid {registrar['pid']}" if registrar["alive"] else "not running"),
            ("hosts", state["hosts"]),
            ("open invites", state["open_invites"]),
            ("dir", state["dir"]),
        ],
    )


@hub.command()
@click.argument("host_id", required=False)
@click.option(
    "--expires", type=DURATION, default="1h", show_default=True, help="How long the invite can be used (e.g. 30m, 2h)."
)
@click.option(
    "--replace", is_flag=True, help="Re-invite a host that has already joined (its old credential stops working)."
)
@click.option("--node", "node", metavar="NAME", help="Invite a new cluster node NAME instead of a host.")
@click.option("--address", metavar="IP", help="With --node: the new node machine's IPv4 address.")
@output.json_option
def invite(
    host_id: str | None, expires: float, replace: bool, node: str | None, address: str | None, as_json: bool
) -> None:
    """Print a one-time invite for the host that will have id HOST_ID.

    Give the line to that host's `bridge join`. It works once, expires, carries the hub's
    addresses and CA (so the joining host trusts nothing else) and a secret the hub does not
    keep. Treat it like a password until it is used. With `--node NAME --address IP` (a
    hub started with --cluster) the line is for `bridge join --node` on a new node machine.
    """
    from bridgecli.hub import host_admin

    if node is not None:
        _node_invite(node, address, expires, host_id, as_json)
        return
    if host_id is None or address is not None:
        raise click.UsageError("give HOST_ID (or --node NAME --address IP for a cluster node)")
    made = host_admin.create_invite(host_id, expires, replace)
    if as_json:
        output.data(made)
        return
    output.line(made["invite"])
    output.note(
        f"bridge: invite {made['id']} for {host_id}, valid until {_when(made['expires'])}; "
        f"on {host_id}: bridge join '<the line above>'"
    )


def _node_invite(name: str, address: str | None, expires: float, host_id: str | None, as_json: bool) -> None:
    from bridgecli.hub import cluster

    if address is None or host_id is not None:
        raise click.UsageError("a node invite takes --node NAME --address IP and no HOST_ID")
    made = cluster.create_node_invite(name, address, expires)
    if as_json:
        output.data(made)
        return
    output.line(made["invite"])
    output.note(
        f"bridge: node invite {made['id']} for {name} at {address}, valid until {_when(made['expires'])}; "
        "on that machine: bridge join --node '<the line above>'"
    )


@hub.command()
@output.json_option
def nodes(as_json: bool) -> None:
    """List the cluster's nodes: name, Erlang node name, AMQPS address, running.

    Works on the hub and on every joined node (a machine that ran `bridge join --node`).
    """
    from bridgecli.hub import cluster

    rows = cluster.list_nodes()
    if as_json:
        output.data({"nodes": rows})
        return
    output.table(
        ["NAME", "NODE", "ADDRESS", "RUNNING"],
        [(r["name"] or "-", r["nodename"], r["address"] or "-", "yes" if r["running"] else "no") for r in rows],
    )


@hub.command("remove-node")
@click.argument("name")
@output.json_option
def remove_node(name: str, as_json: bool) -> None:
    """Forget the stopped cluster node NAME (`rabbitmqctl forget_cluster_node`).

    Refuses the hub's own node, a node that still runs (stop it on its machine first) and a
    removal that would leave fewer than a majority of the remaining nodes running.
    """
    from bridgecli.hub import cluster

    result = cluster.remove_node(name)
    if as_json:
        output.data(result)
        return
    output.note(f"bridge: removed node {name} ({result['nodename']}) from the cluster")


@hub.command()
@click.option("--revoke", "revoke_id", metavar="ID", help="Make this open invite unusable.")
@click.option("--all", "show_all", is_flag=True, help="Also list used, revoked and expired invites.")
@output.json_option
def invites(revoke_id: str | None, show_all: bool, as_json: bool) -> None:
    """List open invites (or revoke one with --revoke ID)."""
    from bridgecli.hub import host_admin

    if revoke_id:
        host_admin.revoke_invite(revoke_id)
        output.note(f"bridge: invite {revoke_id} revoked")
        return
    rows = [r for r in host_admin.list_invites() if show_all or r["state"] == "open"]
    if as_json:
        output.data({"invites": rows})
        return
    output.table(
        ["ID", "HOST", "STATE", "EXPIRES"], [(r["id"], r["host"], r["state"], _when(r["expires"])) for r in rows]
    )


def _printable_host(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` of ``list_hosts`` with the names a joined host chose (its entities' labels and
    gids, as its registrar claims recorded them) made safe for a terminal, in every output."""
    from bridgecli.sanitize import sanitize_line

    def text(value: Any) -> Any:
        return sanitize_line(value, max_chars=200) if isinstance(value, str) else value

    return {
        **row,
        "host": text(row.get("host")),
        "user": text(row.get("user")),
        "entities": [{**e, "gid": text(e.get("gid")), "label": text(e.get("label"))} for e in row.get("entities", [])],
    }


def _with_announced(app: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with the entities each host announces on the roster added to the ones the
    hub recorded (only gids minted before tags are recorded: the rest need no claim). The
    roster view accepts an entity only from its own host. Unreachable roster: as recorded."""
    from bridgecli.errors import BridgeError
    from bridgecli.requests import RosterRequest
    from bridgecli.session import open_session

    try:
        with open_session(lambda: app.config, output.warn) as session:
            entries = session.roster(RosterRequest(host=None)).entries
    except BridgeError as exc:
        output.warn(f"showing recorded entities only: the roster is not readable ({exc.message})")
        return rows
    for row in rows:
        known = {e["gid"] for e in row["entities"]}
        row["entities"] += [
            {"gid": e.gid, "label": e.label}
            for e in entries
            if e.host == row["host"] and e.gid not in known and e.gid != "_gateway"
        ]
    return rows


@hub.command()
@output.json_option
@click.pass_obj
def hosts(app, as_json: bool) -> None:
    """List this hub's hosts: when each joined, whether its gateway is connected, its entities
    (as their hosts announce them, and as the hub recorded them)."""
    from bridgecli.hub import host_admin

    rows = [_printable_host(r) for r in _with_announced(app, host_admin.list_hosts())]
    if as_json:
        output.data({"hosts": rows})
        return
    output.table(
        ["HOST", "JOINED", "GATEWAY", "ENTITIES"],
        [
            (
                r["host"] + (" (hub)" if r["hub"] else ""),
                "revoked " + _when(r["revoked"]) if r["revoked"] else _when(r["joined"]),
                "connected" if r["gateway_connected"] else "-",
                ", ".join(e["label"] or e["gid"][:13] for e in r["entities"]) or "-",
            )
            for r in rows
        ],
    )


@hub.command()
@click.argument("host_id")
@output.json_option
def revoke(host_id: str, as_json: bool) -> None:
    """Cut HOST_ID off now: delete its broker user and close its connections.

    Its inboxes stay, holding what was sent to them, and its gids stay its own: invite it
    again (same id) and it gets them back.
    """
    from bridgecli.hub import host_admin

    result = host_admin.revoke_host(host_id)
    if as_json:
        output.data(result)
        return
    output.note(
        f"bridge: revoked {host_id}: {result['connections_closed']} connection(s) closed; "
        f"its {result['gids_kept']} inbox(es) keep their messages until it joins again"
    )
