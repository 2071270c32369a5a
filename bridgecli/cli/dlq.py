"""``bridge dlq``: the dead-letter queue ``bridge.dlq`` (docs/design.md#invariant-6)."""

from __future__ import annotations

import click

from bridgecli.cli import output


@click.group()
def dlq() -> None:
    """Inspect, retry or purge dead-lettered messages.

    Messages land in bridge.dlq when they are invalid (bad JSON, unknown version, missing
    fields, oversize, invalid UTF-8), when delivery failed messaging.max_attempts times, or
    when their recipient was unregistered. The reason is in the x-bridge-reason header.
    """


@dlq.command("list")
@click.option("--limit", type=click.IntRange(1, 10000), default=100, show_default=True)
@output.json_option
@click.pass_obj
def list_(app, limit: int, as_json: bool) -> None:
    """List dead letters (oldest first) without removing them."""
    from bridgecli import dead_letter_queue

    rows = dead_letter_queue.peek(app.config, limit)
    if as_json:
        output.data({"dead_letters": rows})
        return
    output.table(
        ["ID", "REASON", "QUEUE", "DETAIL"],
        [(r["id"], r["reason"], r["queue"], (r["detail"] or "")[:60]) for r in rows],
    )
    if not rows:
        output.note("bridge.dlq is empty")


@dlq.command("show")
@click.argument("msg_id", metavar="ID")
@output.json_option
@click.pass_obj
def show(app, msg_id: str, as_json: bool) -> None:
    """Show one dead letter with its headers and body."""
    from bridgecli import dead_letter_queue

    row = dead_letter_queue.find(app.config, msg_id)
    if as_json:
        output.data(row)
        return
    for key in ("id", "reason", "detail", "queue", "attempts", "routing_key"):
        output.line(f"{key:12} {row.get(key)}")
    output.line("")
    output.line(row["body"])


@dlq.command("retry")
@click.argument("msg_ids", metavar="ID...", nargs=-1)
@click.option("--all", "retry_all", is_flag=True, help="Retry every dead letter.")
@output.json_option
@click.pass_obj
def retry(app, msg_ids: tuple[str, ...], retry_all: bool, as_json: bool) -> None:
    """Re-publish dead letters to their original recipient's inbox."""
    from bridgecli import dead_letter_queue

    if not msg_ids and not retry_all:
        raise click.UsageError("name the message ids to retry, or pass --all")
    done = dead_letter_queue.retry(app.config, None if retry_all else set(msg_ids))
    if as_json:
        output.data({"retried": done})
    else:
        output.note(f"re-published {len(done)} message(s)")


@dlq.command("purge")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def purge(app, yes: bool) -> None:
    """Delete every dead letter (asks first unless --yes)."""
    from bridgecli import dead_letter_queue

    if not yes:
        click.confirm("Delete every message in bridge.dlq?", abort=True, err=True)
    count = dead_letter_queue.purge(app.config)
    output.note(f"purged {count} message(s) from bridge.dlq")
