"""``bridge poll`` and ``bridge show``: reading messages held on this host."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

import click

from bridgecli.cli import complete, output
from bridgecli.cli.params import DURATION, as_entity

if TYPE_CHECKING:
    from bridgecli.results import Message, PollResult


def _human(message: Message) -> None:
    """A message for a person's terminal: its text is untrusted, so every control character
    is shown as a visible stand-in, never sent to the terminal as input."""
    from bridgecli.sanitize import sanitize, sanitize_line

    when = datetime.datetime.fromtimestamp(message.ts).strftime("%H:%M:%S")
    who = sanitize_line(message.sender_label or message.sender[:13], max_chars=64)
    host = f"@{sanitize_line(message.sender_host, max_chars=64)}" if message.sender_host else ""
    header = f"[{when}] {message.kind} {message.msg_id} from {who}{host}"
    if message.in_reply_to:
        header += f" (re {message.in_reply_to})"
    if message.user:
        header += f" [user {message.user}]"  # authenticated by the broker, unlike fromHost
    output.line(header)
    output.line(sanitize(message.content))
    output.line("")


@click.command()
@as_entity("gid", "Whose messages (default: env BRIDGE_GID, else USER@HOSTID, registered on first use).")
@click.option(
    "--wait", "-w", type=DURATION, default=0.0, metavar="DUR", help="If nothing is held, wait up to DUR for a message."
)
@click.option(
    "--peer", metavar="GID|LABEL", default=None, help="Only the messages from this sender; the others stay held."
)
@click.option("--limit", type=click.IntRange(1, 10000), default=100, show_default=True)
@output.json_option
@click.pass_obj
def poll(app, gid: str | None, wait: float, limit: int, peer: str | None, as_json: bool) -> None:
    """Drain messages held for an entity.

    Prints (and removes from the hold) the messages waiting for a hold-backend entity —
    replies that arrived after a send's --wait gave up included.
    """
    from bridgecli.requests import PollRequest
    from bridgecli.session import open_session

    # taken, not drained, until printed: a poll killed before then loses nothing
    request = PollRequest(gid=gid, wait=wait, limit=limit, confirm=True, peer=peer)
    with open_session(lambda: app.config, output.warn) as session:
        result = session.poll(request)
        _show(result, as_json)
        session.confirm(result)


def _show(result: PollResult, as_json: bool) -> None:
    if result.registered is not None:
        from bridgecli.sender import registered_note

        output.note(registered_note(result.registered, "poll"))
    if as_json:
        output.data(result.shown())
        return
    for message in result.messages:
        _human(message)
    if not result.messages:
        output.note("no messages")


@click.command()
@click.argument("msg_id", metavar="MSGID", shell_complete=complete.message_ids)
@output.json_option
def show(msg_id: str, as_json: bool) -> None:
    """Show one message in full by its id.

    Works for any message received on this host (held, drained or delivered), so an agent
    whose pane showed a cut-down message can read all of it. A unique id prefix is enough.
    """
    from bridgecli import config as cfg
    from bridgecli.requests import ShowRequest
    from bridgecli.session import open_session

    with open_session(cfg.load, output.warn) as session:
        message = session.show(ShowRequest(msg_id=msg_id)).message
    if as_json:
        output.data(message.to_wire())
    else:
        _human(message)
