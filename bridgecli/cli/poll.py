"""``bridge poll`` and ``bridge show``: reading messages held on this host."""

from __future__ import annotations

import datetime

import click

from bridgecli.cli import complete, output
from bridgecli.cli.params import DURATION


def _human(message: dict) -> None:
    """A message for a person's terminal: its text is untrusted, so every control character
    is shown as a visible stand-in, never sent to the terminal as input."""
    from bridgecli.sanitize import sanitize, sanitize_line

    when = datetime.datetime.fromtimestamp(message["ts"]).strftime("%H:%M:%S")
    who = sanitize_line(message.get("fromLabel") or message["from"][:8], max_chars=64)
    host = f"@{sanitize_line(message['fromHost'], max_chars=64)}" if message.get("fromHost") else ""
    header = f"[{when}] {message['kind']} {message['msgId']} from {who}{host}"
    if message.get("inReplyTo"):
        header += f" (re {message['inReplyTo']})"
    if message.get("user"):
        header += f" [user {message['user']}]"  # authenticated by the broker, unlike fromHost
    output.line(header)
    output.line(sanitize(message["content"]))
    output.line("")


@click.command()
@click.option("--as", "gid", metavar="GID|LABEL", envvar="BRIDGE_GID", show_envvar=True,
              shell_complete=complete.local_targets,
              help="Whose messages (default: env BRIDGE_GID, else USER@HOSTID, registered on first use).")
@click.option("--wait", "-w", type=DURATION, default=0.0, metavar="DUR",
              help="If nothing is held, wait up to DUR for a message.")
@click.option("--peer", metavar="GID|LABEL", default=None,
              help="Only the messages from this sender; the others stay held.")
@click.option("--limit", type=click.IntRange(1, 10000), default=100, show_default=True)
@output.json_option
@click.pass_obj
def poll(app, gid: str | None, wait: float, limit: int, peer: str | None, as_json: bool) -> None:
    """Drain messages held for an entity.

    Prints (and removes from the hold) the messages waiting for a hold-backend entity —
    replies that arrived after a send's --wait gave up (seed U3) included.
    """
    from bridgecli.gateway.client import GatewayClient

    client = GatewayClient.connect()
    if client is not None:
        with client:
            # taken, not drained, until printed: a poll killed before then loses nothing
            result = client.call("poll", gid=gid, wait=wait, limit=limit, timeout=None, confirm=True,
                                 **({"peer": peer} if peer else {}))
            _show(result, as_json)
            client.confirm_pending(result)
        return
    from bridgecli.cli.send import direct_sender
    from bridgecli.hoststate.entities import open_registry
    from bridgecli.gateway.operations import message_dict
    from bridgecli.hoststate.store import open_store
    from bridgecli.resolve import resolve_target

    if wait:
        output.warn("no local gateway: returning what is held now, without waiting")
    config = app.config
    registry = open_registry()
    peer_gid = resolve_target(peer, registry=registry, roster=None, force=True) if peer else None
    identity, registered = direct_sender(config, registry, gid)
    store = open_store(config)
    result = {"gid": identity.gid,
              "messages": [message_dict(m) for m in store.drain(identity.gid, limit=limit, sender=peer_gid)],
              **registered}
    _show(result, as_json)


def _show(result: dict, as_json: bool) -> None:
    if result.get("registered"):
        from bridgecli.sender import registered_note

        output.note(registered_note(result["registered"], "poll"))
    if as_json:
        output.data({k: v for k, v in result.items() if k != "pending"})
        return
    for message in result["messages"]:
        _human(message)
    if not result["messages"]:
        output.note("no messages")


@click.command()
@click.argument("msg_id", metavar="MSGID", shell_complete=complete.message_ids)
@output.json_option
def show(msg_id: str, as_json: bool) -> None:
    """Show one message in full by its id.

    Works for any message received on this host (held, drained or delivered), so an agent
    whose pane showed a cut-down message can read all of it. A unique id prefix is enough.
    """
    from bridgecli.gateway.client import GatewayClient

    client = GatewayClient.connect()
    if client is not None:
        with client:
            message = client.call("show", msg_id=msg_id)["message"]
    else:
        from bridgecli import config as cfg
        from bridgecli import messaging
        from bridgecli.gateway.operations import message_dict
        from bridgecli.hoststate.store import open_store

        store = open_store(cfg.load())
        original = messaging.original_message(store, msg_id)
        message = message_dict(store.get(original.msg_id) or original)
    if as_json:
        output.data(message)
    else:
        _human(message)
