"""``bridge hook CLIENT EVENT``: the command an agent client's hooks run (reads, activity).

:mod:`bridgecli.entry` runs it without click (:mod:`bridgecli.hooks`); this command is what
``bridge hook -h`` and the CLI docs show, and what runs when click is reached anyway (a
``python -m bridgecli`` call). Both behave alike: exit 0, nothing on stdout.
"""

from __future__ import annotations

import sys

import click

from bridgecli import hooks


@click.command()
@click.argument("client", type=click.Choice(hooks.CLIENTS))
@click.argument("event", type=click.Choice(hooks.EVENTS))
def hook(client: str, event: str) -> None:
    """Report a turn of an agent client to the gateway (its hooks run this).

    CLIENT is claude-code, gemini or codex; EVENT is prompt (a prompt was submitted: the bridge
    frames in it, by their [bridge xxxxxxxx] markers, were read, and the agent is working),
    stop (the turn ended: idle) or notify (a permission prompt: waiting). The client's JSON
    is read on stdin (at most 1 MiB). The entity is $BRIDGE_GID, else the tmux pane
    ($TMUX_PANE). Never fails the client: always exits 0, prints nothing, gives up after
    0.5 s; BRIDGE_HOOK_DEBUG=1 explains on stderr. `bridge install` adds the hooks.
    """
    sys.exit(hooks.run([client, event], sys.stdin.fileno()))
