"""``bridge send|ask|reply|answer`` through a running gateway, without click: the fast path.

Agents and scripts call these in loops, and through a gateway the work is one JSON line over a
Unix socket, cheaper than importing click; so :mod:`bridgecli.entry` tries this first. It maps
the command line to a request for every client's send (:mod:`bridgecli.sending_client`);
no ``re`` (docs/design.md#goal-b).

It *declines* (returns None) whenever it is not sure to behave exactly like the click command,
which then runs: ``-h``, an unknown option, an argument click would reject, no gateway, or a
socket only platformdirs can locate. ``tests/test_fast_send.py`` keeps both parsers equal.
"""

from __future__ import annotations

import os
import sys

from bridgecli import send_options, sending_client
from bridgecli.requests import SendRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: per command: option -> (name in the values, takes a value), from the table click uses too
OPTIONS: dict[str, dict[str, tuple[str, bool]]] = {
    name: send_options.getopt_table(name) for name in send_options.COMMANDS
}
_DURATIONS = ("wait", "delay")
ARGUMENTS = send_options.ARGUMENTS


def parse(argv: list[str]) -> tuple[str, dict[str, Any]] | None:
    """``(command, values)`` for a command line this path can run, else None.

    GNU getopt's rules (options and arguments in any order, ``--opt=value``, ``-wVALUE``,
    ``--``), by :func:`split`; not argparse, whose help formatter imports shutil and locale
    even when no help is shown. Every dash-word must name an option exactly, as in click.
    """
    if not argv or argv[0] not in OPTIONS:
        return None
    command, args = argv[0], argv[1:]
    options = OPTIONS[command]
    for arg in args:
        if arg == "--":
            break
        # click rejects a dash-word that is not an option ("-5", "-x", "--fr"): leave those to it
        if arg.startswith("-") and arg != "-" and arg.split("=", 1)[0] not in options and arg[:2] not in options:
            return None
    split_up = split(args, options)
    if split_up is None:
        return None
    pairs, positionals = split_up
    if len(positionals) != 2:
        return None
    values: dict[str, Any] = {name: (None if takes else False) for name, takes in options.values()}
    first, second = ARGUMENTS[command]
    values[first], values[second] = positionals
    for opt, text in pairs:
        name, takes = options[opt]
        value: str | float = text
        if name in _DURATIONS:
            from bridgecli.durations import parse as parse_duration  # its regex only when used

            try:
                value = parse_duration(text)
            except ValueError:
                return None  # click reports the bad duration
        values[name] = value if takes else True
    if values["sender"] is None:
        values["sender"] = os.environ.get("BRIDGE_GID") or None
    if SendRequest.command_line_problem(values) is not None:
        return None  # click reports it as a usage error
    return command, values


def split(args: list[str], options: dict[str, tuple[str, bool]]) -> tuple[list[tuple[str, str]], list[str]] | None:
    """``(option pairs, positionals)`` as ``getopt.gnu_getopt`` splits ``args`` for the options
    in ``options`` (``{spelling: (name, takes a value)}``), or None where it raises. Unlike
    getopt: exact long names only (click takes no prefixes), ``POSIXLY_CORRECT`` is ignored
    (click ignores it), and no ``gettext`` import with its regexes."""
    pairs: list[tuple[str, str]] = []
    positionals: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            positionals.extend(rest)
            break
        if arg.startswith("--"):
            opt, equals, text = arg.partition("=")
            if opt not in options or (equals and not options[opt][1]):
                return None  # unknown, or a value given to a flag
            if options[opt][1] and not equals:
                following = next(rest, None)
                if following is None:
                    return None  # its value is missing
                text = following
            pairs.append((opt, text))
        elif arg.startswith("-") and arg != "-":
            letters = arg[1:]  # flags may be bundled; a letter taking a value ends the word
            while letters:
                opt, letters = "-" + letters[0], letters[1:]
                if opt not in options:
                    return None
                if not options[opt][1]:
                    pairs.append((opt, ""))
                    continue
                if not letters:
                    following = next(rest, None)
                    if following is None:
                        return None
                    letters = following
                pairs.append((opt, letters))
                break
        else:
            positionals.append(arg)
    return pairs, positionals


def run(argv: list[str]) -> int | None:
    """Run the command and return its exit code, or None to leave the call to click."""
    parsed = parse(argv)
    if parsed is None:
        return None
    from bridgecli.socketpath import from_environment

    path = from_environment()
    if path is None:
        return None
    from bridgecli.gateway.client import GatewayClient, GatewaySession

    client = GatewayClient.connect(path)
    if client is None:
        return None  # no gateway: click's path publishes directly to the broker
    command, values = parsed
    try:
        with GatewaySession(client) as session:
            request = SendRequest.from_command_line(command, values, sys.stdin.read)
            sending_client.send(session, request, sending_client.printer(values["as_json"], print, _note))
    except (Exception, KeyboardInterrupt) as exc:
        from bridgecli import failures

        code, line = failures.outcome(exc, traceback=failures.wants_traceback(argv))
        if line:
            print(line, file=sys.stderr)
        return code
    return 0


def _note(text: str) -> None:
    print(text, file=sys.stderr)
