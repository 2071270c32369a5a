"""``bridge spawn`` and ``bridge stop``: the control plane (seed U4)."""

from __future__ import annotations

import click

from bridgecli.cli import complete, output
from bridgecli.cli.params import DURATION


def _via_gateway_or_direct(app, op: str, **params):
    from bridgecli.gateway.client import GatewayClient

    client = GatewayClient.connect()
    if client is not None:
        with client:
            result = client.call(op, timeout=None, **params)
            result.pop("ok", None)
            return result
    from bridgecli import control_client
    from bridgecli.hoststate.entities import open_registry

    registry = open_registry()
    # no local gateway to ask: --from / BRIDGE_GID still travel (and are logged there)
    requester = control_client.requester_identity(registry, params.get("sender"), app.config.host_id)
    view = control_client.listen_roster(app.config, app.config.values["roster.interval"] + 0.5)
    if op == "spawn":
        control_client.require_live_host(view, params["host"])
        return control_client.spawn(app.config, profile=params["profile"], host=params["host"],
                                    label=params.get("label"), wait_ready=params.get("wait_ready"),
                                    requester=requester)
    from bridgecli.resolve import resolve_target

    gid = resolve_target(params["target"], registry=registry, roster=view, force=True)
    entry = view.get(gid)
    if entry is None:
        from bridgecli.errors import NotFound

        raise NotFound(f"{params['target']!r} is not in the roster, so its host is unknown", "check `bridge roster`")
    control_client.require_live_host(view, entry.host)
    return control_client.request(app.config, entry.host, {"type": "stop", "gid": gid, "requester": requester},
                                  timeout=30)


@click.command()
@click.argument("profile", shell_complete=complete.profiles)
@click.option("--host", "-H", required=True, metavar="H", shell_complete=complete.hosts, help="Host whose gateway runs the profile.")
@click.option("--label", "-l", default=None, help="Label of the new entity (default: from the profile).")
@click.option("--wait-ready", type=DURATION, default=None, metavar="DUR",
              help="How long the launcher may take to become ready (default: the profile's "
                   "ready_timeout on host H, else 30s).")
@click.option("--from", "sender", metavar="GID|LABEL", envvar="BRIDGE_GID", shell_complete=complete.local_targets, help="Requester identity (logged).")
@output.json_option
@click.pass_obj
def spawn(app, profile: str, host: str, label: str | None, wait_ready: float | None, sender: str | None,
          as_json: bool) -> None:
    """Start an agent from a profile on a host (cross-host spawn).

    Gateway H looks PROFILE up in its own bridge.toml ([profiles.PROFILE]: launcher,
    command, cwd, env, ready_timeout …), launches it locally, waits until it is ready
    (--wait-ready, else the profile's ready_timeout), registers it and announces it on the
    roster. Prints the new gid (JSON: gid, host, label).
    """
    result = _via_gateway_or_direct(app, "spawn", profile=profile, host=host, label=label,
                                    wait_ready=wait_ready, sender=sender)
    if as_json:
        output.data(result)
    else:
        output.line(result["gid"])
        output.note(f"spawned {result['label']} on {result['host']} ({result.get('deliver')})")


@click.command()
@click.argument("target", shell_complete=complete.targets)
@click.option("--from", "sender", metavar="GID|LABEL", envvar="BRIDGE_GID", shell_complete=complete.local_targets, help="Requester identity (logged).")
@output.json_option
@click.pass_obj
def stop(app, target: str, sender: str | None, as_json: bool) -> None:
    """Stop an entity through the launcher that started it.

    Asks the gateway of TARGET's host to stop it (its launcher ends the process) and to
    unregister it; messages still waiting in its inbox go to bridge.dlq.
    """
    result = _via_gateway_or_direct(app, "stop", target=target, sender=sender)
    if as_json:
        output.data(result)
    else:
        output.note(f"stopped {result['label']} on {result['host']}")
