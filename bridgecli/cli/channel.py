"""``bridge channel``: join, leave and list channels (docs/channels.md)."""

from __future__ import annotations

from typing import Any

import click

from bridgecli.cli import output
from bridgecli.cli.params import as_entity

_AS = as_entity(
    "member", "Which entity of this host (default: env BRIDGE_GID, else USER@HOSTID, registered on first use)."
)


@click.group()
def channel() -> None:
    """Join, leave and list channels: one send reaches every member."""


@channel.command()
@click.argument("name")
@_AS
@output.json_option
def join(name: str, member: str | None, as_json: bool) -> None:
    """Join channel NAME: each message sent to '#NAME' then reaches this entity once.

    The membership is kept on this host and survives gateway and broker restarts; the
    roster shows it on every host.
    """
    from bridgecli.requests import ChannelRequest

    answer = _call(ChannelRequest(name=name, member=member))
    if as_json:
        output.data(answer)
        return
    _registered_note(answer)
    who = answer["member"]["label"]
    output.line(
        f"{who} joined #{answer['channel']}" if answer["joined"] else f"{who} is already in #{answer['channel']}"
    )


@channel.command()
@click.argument("name")
@_AS
@output.json_option
def leave(name: str, member: str | None, as_json: bool) -> None:
    """Leave channel NAME: no copy reaches this entity from now on (exit 22 if not in it)."""
    from bridgecli.requests import LeaveRequest

    answer = _call(LeaveRequest(name=name, member=member))
    if as_json:
        output.data(answer)
        return
    output.line(f"{answer['member']['label']} left #{answer['channel']}")


@channel.command(name="list")
@click.argument("name", required=False)
@output.json_option
def list_(name: str | None, as_json: bool) -> None:
    """List channels and their members on every host (only NAME's when given)."""
    from bridgecli.requests import ChannelListRequest
    from bridgecli.sanitize import sanitize_line

    answer = _call(ChannelListRequest(name=name))
    if as_json:
        output.data({"channels": answer["channels"]})
        return
    if not answer["channels"]:
        output.note("no channels yet: `bridge channel join NAME` makes one")
        return
    for found in answer["channels"]:
        members = found["members"]
        output.line(f"#{found['name']}  {len(members)} member{'s' if len(members) != 1 else ''}")
        for member in members:
            label = sanitize_line(str(member["label"]), max_chars=64)
            host = sanitize_line(str(member["host"]), max_chars=64)
            output.line(f"  {label:<24} {host:<16} {member['gid']}")


def _call(request: Any) -> dict[str, Any]:
    from bridgecli.gateway.client import GatewayClient

    client = GatewayClient.require()
    try:
        answer: dict[str, Any] = client.call(request.OP, **request.to_wire())
    finally:
        client.close()
    answer.pop("ok", None)
    return answer


def _registered_note(answer: dict[str, Any]) -> None:
    registered = answer.get("registered")
    if registered:
        output.note(f"bridge: joining as {registered['label']} (gid {registered['gid']}), registered now")
