"""``bridge status``: what the local gateway is doing."""

from __future__ import annotations

import click

from bridgecli.cli import output


@click.command()
@output.json_option
def status(as_json: bool) -> None:
    """Show the local gateway's connection, entities and queues.

    Broker connection and server, each local entity with its ready (in the broker) and
    held (on this host) counts, the dedup store size and the bridge.dlq depth.
    """
    from bridgecli.gateway.client import GatewayClient
    from bridgecli.gids import short

    with GatewayClient.require() as client:
        result = client.call("status", timeout=10)
    result.pop("ok", None)
    if as_json:
        output.data(result)
        return
    broker = result["broker"]
    state = "connected" if broker["connected"] else "DISCONNECTED (reconnecting)"
    if broker["connected"] and broker.get("publishing") is False:  # the publish lane's own connection
        state = "connected, publishing DISCONNECTED (reconnecting)"
    server = broker.get("server") or {}
    output.line(
        f"host       {result['host']} (gateway {result['version']}, pid {result['pid']}, up {result['uptime']:.0f}s)"
    )
    output.line(
        f"broker     {state} {', '.join(broker['uris'])} {server.get('product', '')} {server.get('version', '')}"
    )
    dlq = result["dlq_depth"] if result["dlq_depth"] is not None else "?"
    output.line(f"dedup      {result['dedup_size']} ids    dlq {dlq}")
    for name, value in (result.get("extra") or {}).items():
        output.line(f"{name:<10} {value}")
    for queue in result.get("elsewhere") or []:
        output.line(
            f"CONFLICT   {queue} is consumed by another client (a second gateway with a copy of "
            "this host's files?): not served here until it goes away"
        )
    output.line("")
    output.table(
        ["LABEL", "GID", "ROLE", "DELIVER", "READY", "HELD"],
        [
            (
                e["label"] + (" (consumed elsewhere)" if e.get("elsewhere") else ""),
                short(e["gid"]),
                e["role"],
                e["deliver"],
                "?" if e.get("ready") is None else e["ready"],
                e["held"],
            )
            for e in result["entities"]
        ],
    )
