"""``bridge service``: install, remove and show systemd units for bridge's daemons."""

from __future__ import annotations

import os

import click

from bridgecli.cli import output

_DAEMON = click.argument("daemon", type=click.Choice(["gateway", "hub", "broker"]), default="gateway")
_SCOPE = click.option(
    "--user/--system",
    "user",
    default=True,
    help="A unit of your user's systemd (default) or of the machine's (/etc/systemd/system, needs root).",
)


@click.group()
def service() -> None:
    """Install systemd units for the gateway, hub or broker.

    Units carry absolute paths, Restart=on-failure and the environment the daemon needs
    (PATH, the XDG directories and the non-secret BRIDGE_* variables of this shell). Without a
    running systemd (containers, CI) install and uninstall fail with NO_SYSTEMD; --dry-run
    still prints the unit. See docs/operators.md.
    """


@service.command()
@_DAEMON
@_SCOPE
@click.option("--dry-run", is_flag=True, help="Print the unit and where it would go; change nothing.")
@output.json_option
def install(daemon: str, user: bool, dry_run: bool, as_json: bool) -> None:
    """Write, enable and start the unit of DAEMON (gateway by default)."""
    from bridgecli import service_units as su
    from bridgecli.errors import BridgeError, CannotWrite

    scope = "user" if user else "system"
    unit = su.render(daemon, scope)
    hint = su.linger_hint(scope)
    if dry_run:
        if as_json:
            output.data({"unit": unit.name, "path": str(unit.path), "text": unit.text, "linger": hint})
        else:
            output.note(f"bridge: would write {unit.path}")
            output.line(unit.text.rstrip("\n"))
        return
    su.require_systemd(f"install {unit.name}")
    try:
        unit.path.parent.mkdir(parents=True, exist_ok=True)
        unit.path.write_text(unit.text, encoding="utf-8")
    except OSError as exc:
        raise CannotWrite(f"cannot write {unit.path}: {exc.strerror}", "rerun with sudo for --system") from None
    for args in (("daemon-reload",), ("enable", "--now", unit.name)):
        done = su.systemctl(scope, *args)
        if done.returncode != 0:
            raise BridgeError(
                f"systemctl {' '.join(args)} failed: {done.stderr.strip()[:300]}",
                f"see `journalctl {'--user ' if user else ''}-u {unit.name}`",
            )
    if as_json:
        output.data({"unit": unit.name, "path": str(unit.path), "enabled": True, "linger": hint})
        return
    output.line(str(unit.path))
    output.note(f"bridge: {unit.name} enabled and started")
    if hint:
        output.note(f"bridge: {hint}")


@service.command()
@_DAEMON
@_SCOPE
@click.option("--dry-run", is_flag=True, help="Say what would be removed; change nothing.")
@output.json_option
def uninstall(daemon: str, user: bool, dry_run: bool, as_json: bool) -> None:
    """Stop, disable and remove the unit of DAEMON (gateway by default)."""
    from bridgecli import service_units as su
    from bridgecli.errors import NotFound

    scope = "user" if user else "system"
    path = su.unit_dir(scope) / su.unit_name(daemon)
    if not dry_run:
        su.require_systemd(f"uninstall {path.name}")
        if not path.exists():
            raise NotFound(f"{path} is not installed", "see `bridge service status`")
        su.systemctl(scope, "disable", "--now", path.name)
        path.unlink()
        su.systemctl(scope, "daemon-reload")
    if as_json:
        output.data({"unit": path.name, "path": str(path), "removed": not dry_run})
    else:
        output.note(f"bridge: {'would remove' if dry_run else 'removed'} {path}")


@service.command()
@output.json_option
def status(as_json: bool) -> None:
    """Show which bridge units are installed and whether they run."""
    from bridgecli import service_units as su

    running = su.systemd_running()
    rows = []
    for scope in ("user", "system"):
        for daemon in su.DAEMONS:
            path = su.unit_dir(scope) / su.unit_name(daemon)
            if not path.exists():
                continue
            state = su.systemctl(scope, "is-active", path.name).stdout.strip() if running else "unknown"
            rows.append({"daemon": daemon, "scope": scope, "path": str(path), "active": state or "unknown"})
    if as_json:
        output.data({"systemd": running, "units": rows})
        return
    if not running:
        output.note("bridge: systemd is not running here: states are unknown")
    if not rows:
        output.note("bridge: no bridge units installed (`bridge service install`)")
        return
    output.table(
        ["DAEMON", "SCOPE", "ACTIVE", "UNIT"], [[r["daemon"], r["scope"], r["active"], r["path"]] for r in rows]
    )
    if os.environ.get("XDG_RUNTIME_DIR") is None and any(r["scope"] == "user" for r in rows):
        output.note("bridge: no XDG_RUNTIME_DIR: `systemctl --user` needs a login session (or lingering)")
