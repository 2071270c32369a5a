"""``bridge send`` / ``ask`` / ``reply`` / ``answer``: the commands scripts and agents call.

Through a running local gateway these go over its Unix socket and never import pika; without
one they publish directly to the broker (:func:`bridgecli.session.open_session` picks once).
The console script first tries the same commands without click (:mod:`bridgecli.fast_send`);
these click commands handle what it declines, from the same option table
(:mod:`bridgecli.send_options`), request model and send (:mod:`bridgecli.sending_client`).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from bridgecli import send_options, sending_client
from bridgecli.cli import complete, output
from bridgecli.cli.params import DURATION
from bridgecli.send_options import ARGUMENTS, COMMANDS


def _click_option(option: send_options.Option):
    """The click decorator for one entry of the shared option table."""
    extra: dict[str, Any] = {}
    if option.envvar:
        extra = {"envvar": option.envvar, "show_envvar": True}
    if option.dest == "sender":
        extra["shell_complete"] = complete.local_targets
    if option.kind is None:
        return click.option(*option.flags, option.dest, is_flag=True, help=option.help, **extra)
    kind = DURATION if option.kind == "duration" else None
    return click.option(
        *option.flags, option.dest, type=kind, default=None, metavar=option.metavar, help=option.help, **extra
    )


def _options(command: str):
    """Decorate a command with its options from :data:`~bridgecli.send_options.COMMANDS`."""

    def decorate(func):
        for option in reversed(COMMANDS[command]):
            func = _click_option(option)(func)
        return func

    return decorate


def _deliver(app, command: str, values: dict) -> None:
    """Build the request from the command's values and send it through the host session; a
    command line the request model refuses is click's usage error, as the fast path expects."""
    from bridgecli.errors import UsageProblem
    from bridgecli.requests import SendRequest
    from bridgecli.session import open_session

    try:
        request = SendRequest.from_command_line(command, values, sys.stdin.read)
    except UsageProblem as exc:
        raise click.UsageError(exc.message) from None
    with open_session(lambda: app.config, output.warn) as session:
        sending_client.send(session, request, sending_client.printer(values["as_json"], output.line, output.note))


@click.command()
@click.argument(ARGUMENTS["send"][0], shell_complete=complete.targets)
@click.argument(ARGUMENTS["send"][1])
@_options("send")
@click.pass_obj
def send(app, **values) -> None:
    """Send a message to an entity (gid or label).

    MESSAGE '-' reads it from stdin; with --lines every stdin line becomes one message
    (fast bulk sending from scripts). Prints the message id. With --wait, blocks until the
    REPLY arrives and prints it; on timeout it exits 8 and the late reply is held for a
    later `bridge poll`. A send whose confirm was lost is retried with the same id (the
    recipient gets it once); --key makes a rerun of the command send that id again.
    """
    _deliver(app, "send", values)


@click.command()
@click.argument(ARGUMENTS["ask"][0], shell_complete=complete.targets)
@click.argument(ARGUMENTS["ask"][1])
@_options("ask")
@click.pass_obj
def ask(app, **values) -> None:
    """Ask an entity a question (ASK); --wait for the ANSWER.

    The mid-turn ask: a worker pauses its turn, asks, and resumes on the answer.
    QUESTION '-' reads stdin.
    """
    _deliver(app, "ask", values)


@click.command()
@click.argument(ARGUMENTS["reply"][0], metavar="MSGID", shell_complete=complete.message_ids)
@click.argument(ARGUMENTS["reply"][1])
@_options("reply")
@click.pass_obj
def reply(app, **values) -> None:
    """Reply to a message by its id.

    Sends a REPLY to whoever sent MSGID (a message received on this host), as the local
    entity MSGID was delivered to unless --from or BRIDGE_GID names the sender. MESSAGE '-'
    reads stdin.
    """
    _deliver(app, "reply", values)


@click.command()
@click.argument(ARGUMENTS["answer"][0], metavar="MSGID", shell_complete=complete.ask_ids)
@click.argument(ARGUMENTS["answer"][1])
@_options("answer")
@click.pass_obj
def answer(app, **values) -> None:
    """Answer an ASK by its message id.

    Sends an ANSWER to whoever asked MSGID, so the asker's `bridge ask --wait` resumes; as
    the local entity MSGID was delivered to unless --from or BRIDGE_GID names the sender.
    MESSAGE '-' reads stdin.
    """
    _deliver(app, "answer", values)
