"""``bridge spawn`` and ``bridge stop``: the control plane (docs/design.md#invariant-9, use case U4)."""

from __future__ import annotations

import click

from bridgecli.cli import complete, output
from bridgecli.cli.params import DURATION


@click.command()
@click.argument("profile", shell_complete=complete.profiles)
@click.option(
    "--host",
    "-H",
    required=True,
    metavar="H",
    shell_complete=complete.hosts,
    help="Host whose gateway runs the profile.",
)
@click.option("--label", "-l", default=None, help="Label of the new entity (default: from the profile).")
@click.option(
    "--wait-ready",
    type=DURATION,
    default=None,
    metavar="DUR",
    help="How long the launcher may take to become ready (default: the profile's ready_timeout on host H, else 30s).",
)
@click.option(
    "--prompt",
    "-p",
    metavar="TEXT",
    default=None,
    help="First prompt for the agent, passed on its command line as text, never as an option "
    "(default: the profile's prompt; at most 16 KiB).",
)
@click.option(
    "--from",
    "sender",
    metavar="GID|LABEL",
    envvar="BRIDGE_GID",
    shell_complete=complete.local_targets,
    help="Requester identity (logged).",
)
@output.json_option
@click.pass_obj
def spawn(
    app,
    profile: str,
    host: str,
    label: str | None,
    wait_ready: float | None,
    prompt: str | None,
    sender: str | None,
    as_json: bool,
) -> None:
    """Start an agent from a profile on a host (cross-host spawn).

    Gateway H looks PROFILE up in its own bridge.toml ([profiles.PROFILE]: agent, launcher,
    command, cwd, env, ready_timeout …), launches it locally, waits until it is ready
    (--wait-ready, else the profile's ready_timeout), registers it and announces it on the
    roster. A profile with agent = claude-code, codex, opencode or gemini gets that CLI's
    command, tmux launcher, readiness check and prompt form. Prints the new gid (JSON: gid,
    host, label).
    """
    from bridgecli.requests import SpawnRequest
    from bridgecli.session import open_session

    request = SpawnRequest(profile=profile, host=host, label=label, wait_ready=wait_ready, prompt=prompt, sender=sender)
    with open_session(lambda: app.config, output.warn) as session:
        result = session.spawn(request)
    if as_json:
        output.data(result.to_wire())
    else:
        output.line(result.gid)
        output.note(f"spawned {result.label} on {result.host} ({result.deliver})")


@click.command()
@click.argument("target", shell_complete=complete.targets)
@click.option(
    "--from",
    "sender",
    metavar="GID|LABEL",
    envvar="BRIDGE_GID",
    shell_complete=complete.local_targets,
    help="Requester identity (logged).",
)
@output.json_option
@click.pass_obj
def stop(app, target: str, sender: str | None, as_json: bool) -> None:
    """Stop an entity through the launcher that started it.

    Asks the gateway of TARGET's host to stop it (its launcher ends the process) and to
    unregister it; messages still waiting in its inbox go to bridge.dlq.
    """
    from bridgecli.requests import StopRequest
    from bridgecli.session import open_session

    with open_session(lambda: app.config, output.warn) as session:
        result = session.stop(StopRequest(target=target, sender=sender))
    if as_json:
        output.data(result.to_wire())
    else:
        output.note(f"stopped {result.label} on {result.host}")
