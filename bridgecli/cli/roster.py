"""``bridge roster``: the union presence view of every host."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from bridgecli.cli import complete, output

if TYPE_CHECKING:
    from bridgecli.results import RosterResult


def _fetch(app, host: str | None) -> RosterResult:
    from bridgecli.requests import RosterRequest
    from bridgecli.session import open_session

    with open_session(lambda: app.config, output.warn) as session:
        return session.roster(RosterRequest(host=host))


def _render(result: RosterResult) -> None:
    """Print the roster as a table. Every field came from some host's heartbeat: the view
    sanitises them on ingest, and this does again in case the answer came from an older gateway."""
    from bridgecli.sanitize import sanitize_line

    def text(value: object) -> str:
        return sanitize_line(str(value), max_chars=200)

    now = time.time()
    output.table(
        ["LABEL", "GID", "HOST", "ROLE", "STATUS", "LAST SEEN", "CHANNELS"],
        [
            (
                text(e.label),
                text(e.gid[:13]),
                text(e.host),
                text(e.role),
                text(e.status),
                f"{now - e.last_seen:.0f}s ago",
                text(" ".join(f"#{name}" for name in e.channels)),
            )
            for e in result.entries
        ],
    )
    hosts = ", ".join(text(g.host) for g in result.gateways) or "none"
    output.note(f"{len(result.entries)} entities; live gateways: {hosts}")
    if result.hosts:
        output.note("view freshness: " + "; ".join(_freshness(row, text) for row in result.hosts))
    if result.relay:
        output.note("heard through: " + _heard_through(result.relay, text))


def _heard_through(relay: dict, text) -> str:
    """``roster relay NAME, heard 0.4s ago`` or ``every host directly``."""
    if not str(relay.get("feed") or "").startswith("relay") or not relay.get("relay"):
        return "every host directly"
    age = relay.get("age")
    heard = "never heard" if age is None else f"heard {float(age):.1f}s ago"
    return f"roster relay {text(relay['relay'])}, {heard}"


def _freshness(row: dict, text) -> str:
    """One host's freshness: age of its last frame, and whether the view holds its whole
    truth (``unsynced``: a delta was missed; its entries stay until the next full frame)."""
    how = "per-entity frames" if row.get("protocol") == 1 else ("synced" if row.get("synced") else "UNSYNCED")
    return f"{text(row.get('host'))} {float(row.get('age') or 0):.1f}s ago, {how}"


@click.command()
@click.option("--host", default=None, metavar="H", shell_complete=complete.hosts, help="Only entities on host H.")
@click.option(
    "--watch",
    is_flag=True,
    help="Redraw every interval until Ctrl-C (with --json: one compact JSON document per line).",
)
@output.json_option
@click.pass_obj
def roster(app, host: str | None, watch: bool, as_json: bool) -> None:
    """Show who is where: the union presence view of all hosts.

    Label, short gid, host, role, status, when it was last heard of, and its channels. Through the local
    gateway this is instant; without one, bridge listens on bridge.roster for one
    heartbeat interval (roster.interval) to hear every live gateway.
    """
    while True:
        result = _fetch(app, host)
        if as_json:
            output.data(result.to_wire(), compact=watch)
        else:
            if watch:
                click.clear()
            _render(result)
        if not watch:
            return
        time.sleep(result.interval or 5)
