"""``bridge track``: what became of a message sent from this host (docs/receipts.md)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

import click

from bridgecli.cli import output
from bridgecli.cli.params import DURATION

if TYPE_CHECKING:
    from bridgecli.results import TrackResult

#: the states in the order a message reaches them, as the human form lists them
ORDER = ("sent", "delivered", "read", "dead-lettered")


@click.command()
@click.argument("msg_id", metavar="MSGID")
@click.option(
    "--wait",
    "wait",
    type=click.Choice(["delivered", "read"]),
    default=None,
    help="Block until the message reaches this state (exit 8 at the timeout, 20 if dead-lettered).",
)
@click.option(
    "--timeout", type=DURATION, default=60.0, metavar="DUR", show_default="60s", help="How long --wait waits."
)
@output.json_option
def track(msg_id: str, wait: str | None, timeout: float, as_json: bool) -> None:
    """Show what became of a message sent from this host.

    Prints each state the message reached (sent, delivered, read, dead-lettered) with its
    time and how: typed into a pane, held, run, accepted by a structured client; pulled by a
    poll, seen by the agent's hook, or the turn a client started with it; or why it was
    dead-lettered. Receipts come from the recipient's host, so nobody there is asked.
    Exits 20 when the message was dead-lettered (and not delivered since).
    """
    result = track_message(msg_id, wait, timeout)
    if as_json:
        output.data(result.to_wire())
    else:
        show(result)
    result.check(wait, timeout)


def track_message(msg_id: str, wait: str | None, timeout: float) -> TrackResult:
    """The record of ``msg_id`` from the local gateway (waiting as :class:`TrackRequest` says)."""
    from bridgecli.gateway.client import GatewayClient
    from bridgecli.requests import TrackRequest
    from bridgecli.results import TrackResult

    request = TrackRequest(msg_id=msg_id, wait=wait, within=timeout)
    client = GatewayClient.require()
    try:
        answer = client.call(request.OP, timeout=request.within + 10.0, **request.to_wire())
    finally:
        client.close()
    answer.pop("ok", None)
    return TrackResult.from_wire(answer)


def show(result: TrackResult) -> None:
    """The states for a person: one line each, in the order a message reaches them."""
    from bridgecli.sanitize import sanitize_line

    output.line(f"{result.msg_id} to {result.recipient}")
    for state in ORDER:
        info = result.states.get(state)
        if info is None:
            continue
        when = datetime.datetime.fromtimestamp(float(info.get("at") or 0)).strftime("%H:%M:%S.%f")[:-3]
        how = info.get("reason") or info.get("how") or ""
        ref = f" ({info['ref']})" if info.get("ref") else ""
        output.line(f"  {state:<14} {when}  {sanitize_line(str(how) + ref, max_chars=300)}")
