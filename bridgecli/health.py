"""Health checks shared by ``bridge doctor`` and the gateway's ``GET /healthz``.

A :class:`Check` is one named verdict with its fix. :func:`gateway_checks` judges a gateway
from its ``status`` answer (or the same fields built in the gateway itself): connected to
the broker, publishing, and consuming every local inbox. A gateway is healthy when each of
them is ``ok`` (:func:`healthy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from bridgecli.errors import ExitCode

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"


@dataclass
class Check:
    """One line of the doctor's report (or of ``/healthz``'s body)."""

    name: str
    status: str  # ok | warn | fail | skip
    detail: str
    fix: str | None = None
    #: the exit code this failure maps to (only meaningful when status == fail)
    code: int = int(ExitCode.FAILURE)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def gateway_checks(status: Mapping[str, Any]) -> list[Check]:
    """The broker connection, the publish lane and the inboxes of a gateway whose
    ``status`` carries ``broker.connected``, ``broker.publishing``, ``elsewhere`` and
    ``entities`` rows (``label``, ``gid``, ``consuming``)."""
    broker = status.get("broker") or {}
    checks = []
    if broker.get("connected"):
        checks.append(Check("broker connection", OK, "the consuming connection is up"))
    else:
        checks.append(
            Check(
                "broker connection",
                WARN,
                "the gateway is not connected to the broker (it retries with backoff)",
                "check the gateway's log and `bridge doctor`'s broker check",
            )
        )
    if broker.get("publishing", True):
        checks.append(Check("publish lane", OK, "the publish lane is up"))
    else:
        checks.append(
            Check("publish lane", WARN, "local sends cannot be published now", "check the gateway's log for the lane")
        )
    checks.append(_inboxes(status))
    return checks


def _inboxes(status: Mapping[str, Any]) -> Check:
    rows = [row for row in status.get("entities") or () if isinstance(row, Mapping)]
    elsewhere = list(status.get("elsewhere") or ())
    if elsewhere:
        return Check(
            "inboxes",
            WARN,
            f"{', '.join(elsewhere)} consumed by another client, not served by this gateway",
            "stop the other gateway (a cloned VM, a restored snapshot or a "
            "home directory shared with another machine?); this one takes over by itself",
        )
    idle = [str(row.get("label") or row.get("gid")) for row in rows if not row.get("consuming")]
    if idle:
        return Check(
            "inboxes",
            WARN,
            f"not consuming the inbox of {', '.join(sorted(idle))}",
            "wait for the broker connection; if it is up, see the gateway's log",
        )
    return Check("inboxes", OK, f"consuming all {len(rows)} local inboxes")


def healthy(checks: list[Check]) -> bool:
    """Whether every check is ``ok`` (``skip`` counts as ok)."""
    return all(check.status in (OK, SKIP) for check in checks)


def report(checks: list[Check]) -> dict[str, Any]:
    """The JSON body of ``/healthz`` and ``bridge doctor --json``: ``ok`` and each check."""
    return {"ok": healthy(checks), "checks": [check.as_dict() for check in checks]}
