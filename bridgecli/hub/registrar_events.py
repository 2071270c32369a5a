"""What the hub's registrar reports as it works, for whoever counts it (setting ``hub.metrics``).

:class:`RegistrarEvents` does nothing: it is what a registrar without metrics is given, so
that its request paths call it unconditionally and import no metrics library;
:class:`bridgecli.hub.registrar_metrics.RegistrarMetrics` counts the same events.
"""

from __future__ import annotations

from typing import Any

#: the ``kind`` label of a request: its op when it is one of these, else ``unknown``
REQUEST_KINDS = ("enrol", "enrol-node", "claim", "release", "nodes")


class RegistrarEvents:
    """What the registrar reports as it works, for whoever counts it (setting ``hub.metrics``).
    Every method does nothing here: a registrar without metrics calls them all the same, and
    :class:`bridgecli.hub.registrar_metrics.RegistrarMetrics` counts them. ``outcome`` is
    ``granted``, ``refused``, ``rate_limited`` or ``failed``."""

    def request(self, kind: str, outcome: str) -> None:
        """One request answered (or dead-lettered: ``failed``)."""

    def grants_applied(self) -> None:
        """One host's broker permissions set (a request, an enrolment or a reconcile)."""

    def enrolled(self) -> None:
        """One host joined with an invite."""

    def hosts_known(self, count: int) -> None:
        """The joined, unrevoked hosts the hub knows now."""


def outcome_of(answer: dict[str, Any]) -> str:
    """The ``outcome`` label of a registrar answer (see :class:`RegistrarEvents`)."""
    if answer.get("ok"):
        return "granted"
    kind = answer.get("kind")
    if kind == "rate_limited":
        return "rate_limited"
    return "failed" if kind == "error" else "refused"
