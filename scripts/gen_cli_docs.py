"""Regenerate the generated parts of docs/cli.md from the code; the prose around them stays.

* ``<!-- exit-codes:start/end -->``: one row per :class:`bridgecli.errors.ExitCode` member (a
  member missing from :data:`MEANINGS` stops the script: a new code is explained before it ships);
* ``<!-- commands:start/end -->``: every built-in command's ``--help`` at 100 columns, with
  plugins off (``BRIDGE_LOAD_PLUGINS=""``) so the page does not depend on what is installed.

``--check`` exits 1 when the file is out of date (a test runs that).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "cli.md"
WIDTH = 100

MEANINGS: dict[str, str] = {
    "OK": "Success. `bridge broker start` on a running broker is also 0 (it says so on stderr).",
    "FAILURE": "Unexpected failure — a bug. Rerun with `--traceback` and report it.",
    "USAGE": "Bad command line: unknown command or option, missing argument (click's own code).",
    "CONFIG": "Bad or unreadable configuration: invalid TOML, unknown key, bad value (file and key are named).",
    "BROKER_UNAVAILABLE": "No broker configured, or it cannot be reached or talked to.",
    "GATEWAY_UNAVAILABLE": "No local gateway answers on its socket (`bridge gateway` is not running).",
    "NOT_FOUND": "Unknown target, message id, profile, host, plugin, log file …",
    "AMBIGUOUS": "A label matches several entities; the error lists the candidates.",
    "TIMEOUT": "A `--wait` / `--wait-ready` / start-up deadline passed.",
    "REJECTED": "The message was refused: too large, unroutable, nacked or invalid.",
    "PLUGIN": "A plugin failed, e.g. it implements a hook that does not exist.",
    "MISSING_DEPENDENCY": "A required program (e.g. `rabbitmq-server`) or optional extra is not installed; "
    "the error says how to install it.",
    "PERMISSION": "Unsafe file permissions (a secret file readable by others) or access refused.",
    "CONFLICT": "Already exists / already running elsewhere / inequivalent broker arguments.",
    "BROWSER": "Browser bridge error: re-electing, tab group owned by another agent, no executor.",
    "CANNOT_WRITE": "A file could not be written (read-only directory or file system, full disk, a "
    "path component that is not a directory); the error names the file, and the "
    "old file, if any, is unchanged.",
    "INVITE": "A hub invite that is malformed, already used, expired or revoked (`bridge join`); ask "
    "the hub for a new one with `bridge hub invite HOSTID`.",
    "TLS": "A TLS handshake failed: the broker's certificate is not signed by the trusted CA (for "
    "`bridge join`: the address is not the hub the invite is for), or the TLS files are bad.",
    "CLOCK": "This host's clock and the hub's differ by more than five minutes; fix the time (NTP) and retry.",
    "RATE_LIMITED": "The hub's registrar is refusing this host's requests for a while (too many in a short "
    "time); wait the seconds the error names and retry.",
    "DEAD_LETTERED": "The recipient's gateway dead-lettered the message (`bridge track`, `send --wait`); the "
    "error gives its reason, and `bridge dlq` on the hub shows the message.",
    "BAD_CHANNEL": "A channel name that is not 1–63 lower-case letters, digits, `-` and `_` (starting with a "
    "letter or digit).",
    "NOT_A_MEMBER": "`bridge channel leave` for a channel the entity has not joined.",
    "EMPTY_CHANNEL": "`bridge send '#NAME'` to a channel nobody has joined: no copy went out.",
    "METRICS_ADDRESS": "`bridge gateway --metrics ADDR` (`gateway.metrics`) cannot be served: the address is "
    "malformed (use `PORT`, `HOST:PORT` or `[IPv6]:PORT`) or its port is taken; the gateway stops before "
    "consuming anything.",
    "NO_SYSTEMD": "`bridge service` needs a running systemd (containers and CI have none); `--dry-run` "
    "still prints the unit.",
    "NOT_A_CLUSTER": "A cluster operation (`bridge hub invite --node`, `hub nodes`, `hub remove-node`) on a "
    "hub that is not a cluster (convert it with `bridge hub start --cluster`), or `hub start --cluster` "
    "where the broker directory holds a node this machine did not make.",
    "INTERRUPTED": "Stopped by Ctrl-C.",
}


def exit_code_table() -> str:
    from bridgecli.errors import ExitCode

    missing = [code.name for code in ExitCode if code.name not in MEANINGS]
    if missing:
        raise SystemExit(f"gen_cli_docs: explain {', '.join(missing)} in MEANINGS (scripts/gen_cli_docs.py)")
    rows = ["| Code | Name | Meaning |", "| --- | --- | --- |"]
    rows += [f"| {int(code)} | `{code.name}` | {MEANINGS[code.name]} |" for code in ExitCode]
    return "\n".join(rows)


def _walk(command, ctx, path: list[str]):
    """Yield (path, short help, full help) for ``command`` and, depth first, its subcommands."""
    import click

    yield path, command.get_short_help_str(limit=90), command.get_help(ctx)
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            with sub.make_context(name, [], parent=ctx, resilient_parsing=True) as sub_ctx:
                yield from _walk(sub, sub_ctx, [*path, name])


def _anchor(path: list[str]) -> str:
    return "-".join(path)


def command_reference() -> str:
    os.environ["BRIDGE_LOAD_PLUGINS"] = ""  # built-in commands only, whatever is installed
    from bridgecli import plugins
    from bridgecli.cli import root

    plugins.reset()
    with root.make_context("bridge", [], resilient_parsing=True, terminal_width=WIDTH, max_content_width=WIDTH) as ctx:
        pages = list(_walk(root, ctx, ["bridge"]))
    index = ["| Command | What it does |", "| --- | --- |"]
    index += [f"| [`{' '.join(p)}`](#{_anchor(p)}) | {short.replace('|', '/')} |" for p, short, _ in pages[1:]]
    body = []
    for path, _, text in pages:
        body += [f'<a id="{_anchor(path)}"></a>', f"### `{' '.join(path)}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(index) + "\n\n" + "\n".join(body).rstrip()


def _replace(text: str, name: str, content: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        raise SystemExit(f"gen_cli_docs: {DOC} lacks the {start} … {end} markers")
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    return f"{head}{start}\n{content}\n{end}{tail}"


def render(text: str) -> str:
    text = _replace(text, "exit-codes", exit_code_table())
    return _replace(text, "commands", command_reference())


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    text = DOC.read_text()
    new = render(text)
    if "--check" in argv:
        if new != text:
            print("docs/cli.md is out of date: run python scripts/gen_cli_docs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
