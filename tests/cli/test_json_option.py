"""Meta-test: every built-in command that prints data has ``--json``
(docs/design.md#cli-contract).

"Prints data" is defined by exclusion: :data:`PRINTS_NO_DATA` names each command that does
not, and why. Any other command — including one added tomorrow — must carry ``--json``, so a
new data command without it fails here until it gets the option or a reasoned entry below.
"""

from __future__ import annotations

import click
import pytest

from bridgecli.cli import BUILTIN_COMMANDS, root

#: command path -> why it has no --json. Keep the reason honest: "prints only notes on stderr"
#: means its stdout is empty.
PRINTS_NO_DATA: dict[str, str] = {
    "browser release": "prints one confirmation line, no data (the group name it was given)",
    "browser serve": "long-running broker host; logs to stderr",
    "completion": "prints a shell script for the shell to source, byte-identical to completions/",
    "config set": "prints only notes on stderr",
    "config unset": "prints only notes on stderr",
    "dlq purge": "prints only notes on stderr",
    "gateway": "long-running daemon; logs to stderr (gateway.log_format=json for machine logs)",
    "hook": "run by agent clients' hooks, prints nothing at all (a prompt hook's stdout reaches the model)",
    "relay": "long-running roster relay; logs to stderr",
    "mcp": "long-running stdio MCP server: stdout is the MCP protocol itself",
    "token clear": "prints only notes on stderr",
    "token set": "prints only notes on stderr",
}


def _leaf_commands() -> dict[str, click.Command]:
    """'path words' -> command, for every built-in command and, depth first, subcommand."""
    found: dict[str, click.Command] = {}

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])
        else:
            found[" ".join(path)] = command

    ctx = click.Context(root)
    for name in BUILTIN_COMMANDS:
        walk(root.get_command(ctx, name), [name])
    return found


LEAVES = _leaf_commands()


def _has_json(command: click.Command) -> bool:
    return any(isinstance(p, click.Option) and "--json" in p.opts for p in command.params)


def test_the_walk_reaches_nested_subcommands():
    assert {"send", "config path", "token rotate", "browser do", "dlq retry"} <= set(LEAVES)


@pytest.mark.parametrize("path", sorted(set(LEAVES) - set(PRINTS_NO_DATA)))
def test_every_command_that_prints_data_has_json(path):
    assert _has_json(LEAVES[path]), (
        f"`bridge {path}` has no --json: add output.json_option (data on stdout), or, if it "
        f"prints no data, list it in PRINTS_NO_DATA with the reason"
    )


@pytest.mark.parametrize("path", sorted(PRINTS_NO_DATA))
def test_allow_list_is_not_stale(path):
    assert path in LEAVES, f"PRINTS_NO_DATA names `bridge {path}`, which does not exist"
    assert not _has_json(LEAVES[path]), f"`bridge {path}` has --json now: drop it from PRINTS_NO_DATA"
