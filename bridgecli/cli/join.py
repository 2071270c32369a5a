"""``bridge join``: make this machine a host of a hub, from the hub's one-line invite."""

from __future__ import annotations

import click

from bridgecli.cli import output


@click.command()
@click.argument("invite")
@click.option("--force", is_flag=True, help="Replace an existing different broker.uri / host.id.")
@click.option(
    "--node", "as_node", is_flag=True, help="INVITE is a node invite: make this machine a node of the hub's cluster."
)
@output.json_option
@click.pass_obj
def join(app, invite: str, force: bool, as_node: bool, as_json: bool) -> None:
    """Join the hub that printed INVITE (`bridge hub invite HOSTID` on the hub).

    Checks the hub's certificate against the CA in the invite (nothing else is trusted),
    trades the invite's one-time secret for this host's own broker user (its password is
    made here and never printed), and writes broker.uri, broker.tls_ca, hub.id, host.id
    and security.sender_check = host into bridge.toml (mode 0600). Then runs the doctor's
    checks. Next: `bridge gateway`.

    With --node (from `bridge hub invite --node`): this machine becomes a RabbitMQ node of
    the hub's cluster instead (docs/hub.md).
    """
    import os

    if as_node:
        _join_node(invite, as_json)
        return

    from bridgecli import doctor
    from bridgecli.config import load
    from bridgecli.hub.join import join as do_join

    joined = do_join(invite, force=force)
    checks = doctor.run(lambda: load(app.overrides))
    failed = [c for c in checks if c.status == doctor.FAIL]
    if as_json:
        output.data(
            {
                "hub": joined.hub,
                "host": joined.host,
                "address": joined.address,
                "config": str(joined.config_file),
                "ca": str(joined.ca_file),
                "ca_fingerprint": joined.ca_fingerprint,
                "checks": [c.as_dict() for c in checks],
            }
        )
    else:
        output.line(
            f"joined hub {joined.hub} as host {joined.host} (amqps://{joined.address}, "
            f"CA sha256:{joined.ca_fingerprint[:16]}…)"
        )
        for check in checks:
            output.note(f"  {check.status:<4} {check.name}: {check.detail}")
    if os.environ.get("BRIDGE_BROKER_URI") or os.environ.get("BRIDGE_HOST_ID"):
        output.warn(
            "BRIDGE_BROKER_URI / BRIDGE_HOST_ID are set in this environment and override what join wrote; unset them"
        )
    if failed:
        output.warn(f"doctor: {failed[0].name}: {failed[0].detail}")
    else:
        output.note("bridge: next, run `bridge gateway` (e.g. in tmux)")


def _join_node(invite: str, as_json: bool) -> None:
    from bridgecli.hub.node_join import join_node

    joined = join_node(invite)
    if as_json:
        output.data(joined)
        return
    output.line(f"joined the cluster of hub {joined['hub']} as node {joined['name']} ({joined['nodename']})")
    output.note(f"bridge: AMQPS on {joined['address']}; joined {joined['joined']} in {joined['seconds']:.1f}s")
