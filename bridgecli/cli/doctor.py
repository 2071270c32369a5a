"""``bridge doctor``: one screen of health checks, each failure with its fix."""

from __future__ import annotations

import click

from bridgecli.cli import output

_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


@click.command()
@output.json_option
@click.pass_obj
def doctor(app, as_json: bool) -> None:
    """Check config, broker, gateway and file permissions.

    Checks that the config file is valid, the broker is reachable (product, version), the
    capabilities later features use (quorum queues, the delay exchange, consumer
    timeout), whether the local gateway answers, which agent clients have bridge configured
    (warning on an entry that runs another or a missing bridge), and that secret files are
    private.
    Exits non-zero (with the first failure's exit code) if any check fails; warnings do
    not fail.
    """
    from bridgecli import doctor as checks_mod

    checks = checks_mod.run(lambda: app.config)
    code = checks_mod.exit_code(checks)
    if as_json:
        output.data({"ok": code == 0, "checks": [c.as_dict() for c in checks]})
    else:
        for check in checks:
            output.line(f"{_MARK[check.status]}  {check.name}: {check.detail}")
            if check.fix and check.status in ("fail", "warn"):
                output.line(f"      fix: {check.fix}")
    if code:
        output.note(f"bridge: doctor found {sum(c.status == 'fail' for c in checks)} failing check(s)")
        raise click.exceptions.Exit(int(code))
