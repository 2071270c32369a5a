"""``bridge install`` / ``bridge uninstall``: add or remove bridge's MCP entry in agent clients.

Every client's file is read and checked before any is written, so bad input (an unknown or
missing client, a file that does not parse) leaves every file as it was.
"""

from __future__ import annotations

import json

import click

from bridgecli.cli import complete, output

_CLIENT_NAMES = ", ".join(complete.CLIENTS)


def _options(func):  # decorator
    func = output.json_option(func)
    func = click.option("--dry-run", is_flag=True, help="Print the change (file and entry); write nothing.")(func)
    func = click.option(
        "--scope",
        type=click.Choice(["user", "project"]),
        default="user",
        show_default=True,
        help="The user's file, or the client's project file in the current directory.",
    )(func)
    func = click.option("--all", "all_", is_flag=True, help="Every client found on this host.")(func)
    return click.argument("names", metavar="CLIENT...", nargs=-1, shell_complete=complete.clients)(func)


def _select(names: tuple[str, ...], all_: bool, scope: str) -> list:
    """The clients to edit: named ones (each known and installed) or, with --all, those found."""
    from bridgecli import clients
    from bridgecli.errors import MissingDependency

    if all_ and names:
        raise click.UsageError("give CLIENT names or --all, not both")
    if not names and not all_:
        raise click.UsageError(f"name a client ({_CLIENT_NAMES}) or use --all")
    if all_:
        chosen = [c for c in clients.CLIENTS.values() if c.found()]
        if not chosen:
            raise MissingDependency(
                f"no agent client found on this host (looked for {_CLIENT_NAMES})",
                "install one, or name it explicitly",
            )
        if scope == "project":
            for client in chosen:
                if client.project_file is None:
                    output.note(f"bridge: {client.name} has no project file (only {client.user_file()}): skipped")
            chosen = [c for c in chosen if c.project_file is not None]
        return chosen
    chosen = [clients.get(name) for name in dict.fromkeys(names)]
    for client in chosen:
        if scope == "project" and client.project_file is None:
            raise click.UsageError(f"{client.name} has no project file, only {client.user_file()}: use --scope user")
        clients.require_found(client)
    return chosen


def _report(changes: list, dry_run: bool, as_json: bool) -> None:
    if as_json:  # one item per client; its hooks' change (when any) under "hooks"
        items: list[dict] = []
        for change in changes:
            if change.part == "hooks":
                items[-1]["hooks"] = {k: v for k, v in change.as_dict().items() if k not in ("client", "part")}
            else:
                items.append({k: v for k, v in change.as_dict().items() if k != "part"})
        output.data({"dryRun": dry_run, "clients": items})
        return
    for change in changes:
        what = "hooks" if change.part == "hooks" else "entry"
        if not change.changed:
            state = f"bridge's {what} already as wanted" if change.entry is not None else f"no bridge {what}"
            output.line(f"{change.client}: unchanged — {state} in {change.file}")
            continue
        verb = {"added": "add", "updated": "update", "removed": "remove"}[change.action]
        if dry_run:
            output.line(f"{change.client}: would {verb} bridge's {what} in {change.file}:")
        else:
            backup = f" (backup: {change.backup})" if change.backup else ""
            output.line(f"{change.client}: {change.action} bridge's {what} in {change.file}{backup}:")
        shown = change.entry if change.part == "hooks" else {"bridge": change.entry}
        for text in json.dumps(shown, indent=2).splitlines():
            output.line(f"  {text}")
    if not dry_run and changes and not any(c.changed for c in changes):
        output.note("bridge: nothing to change")


def _run(changes: list, dry_run: bool, as_json: bool) -> None:
    from bridgecli import clients

    if not dry_run:
        written: dict[str, str | None] = {}  # file -> its backup
        for change in changes:
            if change.changed and change.file in written:
                change.backup = written[change.file]  # one write carried both parts (same data)
                continue
            clients.apply(change)
            if change.changed:
                written[change.file] = change.backup
    _report(changes, dry_run, as_json)
    if not as_json:
        from bridgecli.client_hooks import TABLES

        for change in changes:
            note = TABLES[change.client].note if change.part == "hooks" else None
            if note and change.action in ("added", "updated"):
                output.note(f"bridge: {change.client}: {note}")


def _with_hooks(changes: list, chosen: list, scope: str, install: bool) -> list:
    """Each MCP change followed by the hooks change of a client bridge has hooks for (user
    settings only: a project's hooks are the project's)."""
    from bridgecli import client_hooks

    if scope != "user":
        return changes
    out = []
    for client, change in zip(chosen, changes, strict=True):
        out.append(change)
        if client_hooks.supported(client):
            out.append(client_hooks.plan(client, install, base=change))
    return out


@click.command()
@_options
@click.option("--label", metavar="LABEL", default=None, help="Passed to `bridge mcp --label`.")
@click.option(
    "--role", type=click.Choice(["main", "orchestrator"]), default=None, help="Passed to `bridge mcp --role`."
)
@click.option("--no-hooks", is_flag=True, help="Only the MCP entry: no read-receipt and activity hooks.")
def install(
    names: tuple[str, ...],
    all_: bool,
    scope: str,
    dry_run: bool,
    as_json: bool,
    label: str | None,
    role: str | None,
    no_hooks: bool,
) -> None:
    """Add bridge's MCP server to Claude Code, Codex, OpenCode, Gemini or Cursor.

    CLIENT: claude-code, codex, opencode, gemini or cursor. The entry, named "bridge", runs
    this bridge by absolute path, not a `bridge` on PATH (iproute2's), in the user's
    file or (--scope project) the client's file here; Codex has none. Claude Code, Gemini and
    Codex also get hooks (~/.claude or ~/.gemini/settings.json, $CODEX_HOME/hooks.json) that
    report reads and activity (docs/hooks.md; user scope; --no-hooks: none). Other keys and hooks are kept; the file
    is backed up (FILE.bridge-backup-TIME) and replaced atomically; reruns change nothing.
    Exit: 6 unknown client, 11 client not installed, 3 file unreadable.
    """
    from bridgecli import clients

    chosen = _select(names, all_, scope)
    command = clients.mcp_command(label, role)
    changes = [clients.plan_install(c, scope, command) for c in chosen]
    if not no_hooks:
        changes = _with_hooks(changes, chosen, scope, install=True)
    _run(changes, dry_run, as_json)


@click.command()
@_options
def uninstall(names: tuple[str, ...], all_: bool, scope: str, dry_run: bool, as_json: bool) -> None:
    """Remove bridge's MCP server entry from agent clients.

    Removes only the entry named "bridge" from the same files `bridge install` edits, and
    (--scope user) bridge's own hooks (Claude Code, Gemini, Codex), after a backup
    (FILE.bridge-backup-TIME); every other server, hook and key stays. A client without
    them is reported unchanged.
    """
    from bridgecli import clients

    chosen = _select(names, all_, scope)
    changes = _with_hooks([clients.plan_uninstall(c, scope) for c in chosen], chosen, scope, install=False)
    _run(changes, dry_run, as_json)
