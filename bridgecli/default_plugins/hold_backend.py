"""The ``hold`` delivery backend: the final hop as a pull (docs/design.md#invariant-3).

Messages for a main/orchestrator are stored durably on the host (and then acked on the
broker, so RabbitMQ's ``consumer_timeout`` can never close the channel under a long hold)
until ``bridge poll`` / ``bridge_poll`` drains them.
"""

from __future__ import annotations

from bridgecli import hookimpl
from bridgecli.interfaces import BackendContext, DeliveryBackend


def _factory(context: BackendContext) -> DeliveryBackend:
    from bridgecli.gateway.hold import HoldBackend

    return HoldBackend(context)


@hookimpl
def register_delivery_backends(register) -> None:
    register("hold", _factory)
