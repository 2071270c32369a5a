"""What a gateway reports as it works, for whoever counts it (``bridge gateway --metrics``).

:class:`GatewayEvents` does nothing: it is what a gateway without metrics is given, so that
the delivery paths call it unconditionally and import no metrics library. Its methods are
called from the I/O thread, delivery workers and the local API's threads alike, and must
never raise or block.
"""

from __future__ import annotations

from typing import Any

from bridgecli.envelope import Envelope
from bridgecli.interfaces import Entity


class GatewayEvents:
    """Each event the gateway reports (all no-ops here; see ``gateway/metrics.py``)."""

    def sent(self, envelope: Envelope) -> None:
        """The broker confirmed a local sender's message."""

    def delivered(self, entity: Entity, envelope: Envelope) -> None:
        """``envelope`` reached local ``entity`` (through its backend, held included)."""

    def dead_lettered(self, queue: str, props: Any, reason: str) -> None:
        """A delivery from ``queue`` (pika ``props``) went to the dead-letter queue."""

    def deduplicated(self, entity: Entity, envelope: Envelope) -> None:
        """A repeat of a message ``entity`` already had was dropped."""

    def retried(self, entity: Entity, envelope: Envelope) -> None:
        """A failed delivery to ``entity`` will be tried again."""

    def connected(self) -> None:
        """The consuming connection (re)connected."""

    def api_request(self, op: str) -> None:
        """The local API took a request for operation ``op``."""

    def api_error(self, code: str) -> None:
        """The local API answered with an error of exit-code name ``code``."""


#: the events of a gateway nobody counts
NO_EVENTS = GatewayEvents()
