"""``bridge send`` / ``ask`` / ``reply`` / ``answer``: the commands scripts and agents call.

Through a running local gateway these go over its Unix socket and never import pika; without
one they publish directly to the broker. The console script first tries the same commands
without click (:mod:`bridgecli.fast_send`, which also holds the request and output code shared
with this module); these click commands handle what it declines.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from bridgecli.cli import complete, output
from bridgecli.cli.params import DURATION
from bridgecli.fast_send import call_gateway, read_content, result_lines

_from = click.option("--from", "sender", metavar="GID|LABEL", envvar="BRIDGE_GID", show_envvar=True,
                     shell_complete=complete.local_targets,
                     help="Who is sending (default: env BRIDGE_GID, else USER@HOSTID, registered on first use).")
_wait = click.option("--wait", "-w", type=DURATION, default=None, metavar="DUR",
                     help="Block until the reply arrives (e.g. 30s, 10m) and print it; needs the local gateway.")
_turn = click.option("--turn", default=None, metavar="ID", help="Turn id to correlate a mid-turn exchange.")


def _deliver(app, *, as_json: bool, command: str, contents: list[str], sender: str | None,
             target: str | None = None, msg_id: str | None = None, delay: float | None = None,
             force: bool = False, turn: str | None = None, wait: float | None = None, bulk: bool = False,
             new_id: str | None = None) -> None:
    """Send, and print the result; a reply waited for is confirmed to the gateway only once
    it is printed (it is held again if this process dies first)."""
    from bridgecli.gateway.client import GatewayClient

    client = GatewayClient.connect()
    if client is not None:
        with client:
            result = call_gateway(client, command=command, contents=contents, sender=sender, target=target,
                                  msg_id=msg_id, delay=delay, force=force, turn=turn, wait=wait, bulk=bulk,
                                  new_id=new_id)
            _print(result, as_json)
            client.confirm_pending(result)
        return
    if wait:
        from bridgecli.errors import GatewayUnavailable

        raise GatewayUnavailable("--wait needs the local gateway (it collects the reply from your inbox)",
                                 "start `bridge gateway`, or send without --wait and `bridge poll` later")
    from bridgecli import direct
    from bridgecli.hoststate.entities import open_registry
    from bridgecli.hoststate.store import open_store

    registry = open_registry()
    registered: dict[str, Any] = {}

    def identity():
        found, reported = direct_sender(app.config, registry, sender)
        registered.update(reported)
        return found

    envelopes = direct.send(app.config, registry, open_store(app.config), command=command,
                            contents=contents, identity=identity, target=target, msg_id=msg_id, delay=delay,
                            force=force, turn=turn, new_id=new_id)
    if bulk:
        result = {"msgIds": [e.msg_id for e in envelopes], "to": envelopes[0].recipient if envelopes else None}
    else:
        result = {"msgId": envelopes[0].msg_id, "to": envelopes[0].recipient, "kind": envelopes[0].kind}
    _print({**result, **registered}, as_json)


def direct_sender(config, registry, given: str | None) -> tuple[Any, dict[str, Any]]:
    """The sender without a gateway (:func:`bridgecli.sender.resolve`), and the result field
    ``registered`` (``{}`` unless a default identity was registered just now, as the gateway
    reports it)."""
    from bridgecli import direct, plugins, sender

    def register(**fields: str):
        entity, problem = direct.register_entity(config, registry, plugins.get(), **fields)
        if problem is not None:
            output.warn(f"registered {entity.label}, but its inbox is not declared yet ({problem.message}); "
                        "the gateway declares it when it starts")
        return entity

    identity, created = sender.resolve(registry, given, host_id=config.host_id, register=register)
    return identity, ({"registered": {"gid": created.gid, "label": created.label}} if created else {})


def _print(result: dict[str, Any], as_json: bool) -> None:
    out, err = result_lines(result, as_json)
    for text in out:
        output.line(text)
    for text in err:
        output.note(text)


@click.command()
@click.argument("target", shell_complete=complete.targets)
@click.argument("message")
@_from
@_wait
@click.option("--delay", type=DURATION, default=None, metavar="DUR",
              help="Deliver after DUR (through bridge.delay).")
@click.option("--lines", is_flag=True,
              help="With MESSAGE '-': send each non-empty stdin line as its own message (bulk mode).")
@click.option("--force", is_flag=True, help="Send to a gid even if no gateway announces it in the roster.")
@click.option("--id", "new_id", default=None, metavar="UUID",
              help="Use this message id: resending with the same id after an unclear failure is deduplicated.")
@_turn
@output.json_option
@click.pass_obj
def send(app, target: str, message: str, sender: str | None, wait: float | None, delay: float | None,
         lines: bool, force: bool, new_id: str | None, turn: str | None, as_json: bool) -> None:
    """Send a message to an entity (gid or label).

    MESSAGE '-' reads it from stdin; with --lines every stdin line becomes one message
    (fast bulk sending from scripts). Prints the message id. With --wait, blocks until the
    REPLY arrives and prints it; on timeout it exits 8 and the late reply is held for a
    later `bridge poll`.
    """
    if lines:
        if message != "-":
            raise click.UsageError("--lines reads stdin: pass '-' as MESSAGE")
        if wait or new_id:
            raise click.UsageError("--lines cannot be combined with --wait or --id")
        contents = [line for line in sys.stdin.read().splitlines() if line.strip()]
        _deliver(app, as_json=as_json, command="send", contents=contents, sender=sender, target=target,
                 delay=delay, force=force, turn=turn, bulk=True)
    else:
        _deliver(app, as_json=as_json, command="send", contents=[read_content(message)], sender=sender,
                 target=target, delay=delay, force=force, turn=turn, wait=wait, new_id=new_id)


@click.command()
@click.argument("target", shell_complete=complete.targets)
@click.argument("question")
@_from
@_wait
@click.option("--force", is_flag=True, help="Send to a gid even if no gateway announces it in the roster.")
@_turn
@output.json_option
@click.pass_obj
def ask(app, target: str, question: str, sender: str | None, wait: float | None, force: bool,
        turn: str | None, as_json: bool) -> None:
    """Ask an entity a question (ASK); --wait for the ANSWER.

    The mid-turn ask (seed U2): a worker pauses its turn, asks, and resumes on the answer.
    QUESTION '-' reads stdin.
    """
    _deliver(app, as_json=as_json, command="ask", contents=[read_content(question)], sender=sender,
             target=target, force=force, turn=turn, wait=wait)


@click.command()
@click.argument("msg_id", metavar="MSGID", shell_complete=complete.message_ids)
@click.argument("message")
@_from
@_wait
@output.json_option
@click.pass_obj
def reply(app, msg_id: str, message: str, sender: str | None, wait: float | None, as_json: bool) -> None:
    """Reply to a message by its id.

    Sends a REPLY to whoever sent MSGID (a message received on this host). MESSAGE '-'
    reads stdin.
    """
    _deliver(app, as_json=as_json, command="reply", contents=[read_content(message)], sender=sender,
             msg_id=msg_id, wait=wait)


@click.command()
@click.argument("msg_id", metavar="MSGID", shell_complete=complete.ask_ids)
@click.argument("message")
@_from
@output.json_option
@click.pass_obj
def answer(app, msg_id: str, message: str, sender: str | None, as_json: bool) -> None:
    """Answer an ASK by its message id.

    Sends an ANSWER to whoever asked MSGID, so the asker's `bridge ask --wait` resumes.
    MESSAGE '-' reads stdin.
    """
    _deliver(app, as_json=as_json, command="answer", contents=[read_content(message)], sender=sender,
             msg_id=msg_id)
