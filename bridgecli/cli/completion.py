"""``bridge completion SHELL``: print the completion script click generates for ``bridge``.

The scripts are never hand-written (STYLE.md): this prints exactly what
``_BRIDGE_COMPLETE=SHELL_source bridge`` prints, and ``completions/`` holds the same bytes
(``scripts/gen_completions.py`` regenerates them; a test diffs them). The scripts only call
back into ``bridge`` with ``_BRIDGE_COMPLETE`` set; what a TAB offers (labels, hosts,
message ids …) is computed then by :mod:`bridgecli.cli.complete`.
"""

from __future__ import annotations

import click

#: shell -> the file under ``completions/`` that holds its script (zsh's ``_bridge`` is the
#: name ``compinit`` expects in an ``fpath`` directory).
SHELLS: dict[str, str] = {"bash": "bridge.bash", "zsh": "_bridge", "fish": "bridge.fish"}
PROG_NAME = "bridge"
COMPLETE_VAR = "_BRIDGE_COMPLETE"


def script(shell: str) -> str:
    """The completion script for ``shell``, byte for byte what click's own ``SHELL_source``
    instruction prints."""
    from click.shell_completion import get_completion_class

    from bridgecli.cli import root

    cls = get_completion_class(shell)
    if cls is None:  # pragma: no cover - SHELLS only names shells click supports
        raise click.UsageError(f"click has no completion support for {shell}")
    return cls(root, {}, PROG_NAME, COMPLETE_VAR).source()


@click.command()
@click.argument("shell", type=click.Choice(sorted(SHELLS)))
def completion(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish.

    The script is click's own (the same bytes as completions/ in the source tree). Install
    it once, then open a new shell (the README's "Shell completion" has the details):

    \b
      bash: bridge completion bash > ~/.local/share/bash-completion/completions/bridge
      zsh:  bridge completion zsh > ~/.zfunc/_bridge   (~/.zfunc on $fpath before compinit)
      fish: bridge completion fish > ~/.config/fish/completions/bridge.fish

    TAB then completes commands and options, and labels, gids, hosts, spawn profiles,
    message ids and browser groups — from the local gateway's socket or local files and
    caches, never from the broker.
    """
    # as click does for SHELL_source: bytes, no added newline (no CRLF translation either)
    click.echo(script(shell).encode(), nl=False)
