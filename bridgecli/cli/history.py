"""``bridge history`` and ``bridge thread``: the messages this host archived (docs/history.md)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import click

from bridgecli.cli import complete, output
from bridgecli.cli.params import DURATION, as_entity

if TYPE_CHECKING:
    from bridgecli.results import ArchivedMessage, HistoryResult


@click.command()
@as_entity("as_gid", "Only this local entity's messages (default: env BRIDGE_GID, else every entity on this host).")
@click.option(
    "--with",
    "with_",
    metavar="GID|LABEL",
    default=None,
    shell_complete=complete.targets,
    help="Only the messages exchanged with this peer.",
)
@click.option("--channel", metavar="NAME", default=None, help="Only the messages of this channel.")
@click.option(
    "--search", metavar="TEXT", default=None, help="Only messages with all these words; a trailing * is a prefix."
)
@click.option("--since", type=DURATION, default=None, metavar="DUR", help="Only messages of the last DUR (e.g. 2h).")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@output.json_option
def history(
    as_gid: str | None,
    with_: str | None,
    channel: str | None,
    search: str | None,
    since: float | None,
    limit: int,
    as_json: bool,
) -> None:
    """Show and search the messages this host's entities sent and received.

    Newest first, from the archive the gateway keeps (history.keep, history.max_bytes).
    --search matches whole words of the content and the sender's label; every word must
    match, and a word ending in * matches as a prefix (deplo*). Content is shown inert.
    """
    from bridgecli.requests import HistoryRequest

    request = HistoryRequest(as_gid=as_gid, with_=with_, channel=channel, search=search, since=since, limit=limit)
    _print(_call(request.OP, request.to_wire()), as_json, "no archived messages match")


@click.command()
@click.argument("msg_id", metavar="MSGID", shell_complete=complete.message_ids)
@output.json_option
def thread(msg_id: str, as_json: bool) -> None:
    """Show the conversation an archived message belongs to.

    What it answers up to the first message, then every reply or answer to any of them, in
    time order. A unique id prefix of 8 or more characters is enough.
    """
    from bridgecli.requests import ThreadRequest

    request = ThreadRequest(msg_id=msg_id)
    _print(_call(request.OP, request.to_wire()), as_json, "no messages")


def _call(op: str, fields: dict[str, Any]) -> HistoryResult:
    """The local gateway's answer to ``op`` (history is the gateway's: no direct path)."""
    from bridgecli.gateway.client import GatewayClient
    from bridgecli.results import HistoryResult

    client = GatewayClient.require()
    try:
        answer = client.call(op, timeout=30.0, **fields)
    finally:
        client.close()
    answer.pop("ok", None)
    return HistoryResult.from_wire(answer)


def _print(result: HistoryResult, as_json: bool, empty: str) -> None:
    if as_json:
        output.data(result.to_wire())
        return
    for message in result.messages:
        show(message)
    if not result.messages:
        output.note(empty)


def show(message: ArchivedMessage) -> None:
    """One archived message for a person's terminal: its text and every field a sender
    chose are untrusted, so each control character is shown as a visible stand-in."""
    from bridgecli.sanitize import sanitize, sanitize_line

    when = datetime.datetime.fromtimestamp(message.ts).strftime("%Y-%m-%d %H:%M:%S")
    who = sanitize_line(message.sender_label or message.sender[:13], max_chars=64)
    host = f"@{sanitize_line(message.sender_host, max_chars=64)}" if message.sender_host else ""
    to = f"#{sanitize_line(message.channel, max_chars=64)}" if message.channel else message.recipient[:13]
    header = f"[{when}] {message.direction} {message.kind} {message.msg_id} from {who}{host} to {to}"
    if message.in_reply_to:
        header += f" (re {sanitize_line(message.in_reply_to, max_chars=36)})"
    from bridgecli.receipts import STATES  # in the order a message reaches them

    furthest = next((state for state in reversed(STATES) if state in message.states), None)
    if furthest:
        header += f" [{furthest}]"
    output.line(header)
    output.line(sanitize(message.content))
    output.line("")
