"""``bridge tap``: an audit/monitor copy of ``bridge.msg``'s traffic; never takes from an inbox."""

from __future__ import annotations

import click

from bridgecli.cli import output


@click.command()
@click.option("--count", "-n", type=click.IntRange(1), default=None, help="Stop after N messages.")
@output.json_option
@click.pass_obj
def tap(app, count: int | None, as_json: bool) -> None:
    """Print live traffic on bridge.msg.

    Binds a transient, exclusive queue with '#' on bridge.msg and prints every message
    routed through it (it never takes messages from anyone's inbox). Ctrl-C stops.
    """
    import json

    from bridgecli.amqp import tap as tapping
    from bridgecli.amqp.connection import connect
    from bridgecli.sanitize import sanitize_line

    connection = connect(app.config, name="bridge-tap")
    channel = connection.channel()
    name = tapping.bind(channel)
    output.note(f"tapping bridge.msg (queue {name}); Ctrl-C to stop")
    seen = 0
    try:
        for method, _props, body in channel.consume(name, auto_ack=True):
            row = tapping.row(method.routing_key, body)
            if as_json:
                output.line(json.dumps(row, ensure_ascii=False))
            elif "invalid" in row:
                output.line(f"INVALID ({row['invalid']}) -> {sanitize_line(row['routing_key'])}: {row['body']!r}")
            else:  # message text is untrusted: no control character reaches the terminal
                who = sanitize_line(row["fromLabel"] or row["from"][:13], max_chars=40)
                text = sanitize_line(row["content"], max_chars=100)
                output.line(f"{row['kind']:6} {who} -> {row['to'][:8]} {row['msgId'][:8]}: {text}")
            seen += 1
            if count is not None and seen >= count:
                break
    except KeyboardInterrupt:
        pass
    finally:
        try:
            connection.close()
        except Exception:  # the tap ends either way: a broken connection has nothing left to close
            pass
