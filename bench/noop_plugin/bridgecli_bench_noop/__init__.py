"""The ``noop`` delivery backend, for bench/messaging.py only.

``deliver`` returns at once, so a gateway serving a ``--deliver noop`` entity measures its
own per-message cost (parse, validate, dedup record, ack) and nothing else. ``inline`` puts
delivery on the AMQP thread, like the built-in ``hold`` backend. The gateway still writes
the dedup record (``records_itself`` is not set), i.e. dedup persistence stays on.

Not installed into the project venv: bench/messaging.py puts this directory and a generated
``.dist-info`` (with the entry point) on ``PYTHONPATH`` of the gateway it starts. To use it
elsewhere: ``pip install -e bench/noop_plugin``.
"""

from __future__ import annotations

from bridgecli import hookimpl

__version__ = "0.1.0"


class NoopBackend:
    """Accepts every message; delivering costs nothing."""

    inline = True

    def __init__(self, context) -> None:
        self.context = context

    def check_address(self, address: str | None) -> None:
        """Any address (or none) is fine."""

    def deliver(self, entity, envelope) -> None:
        """Do nothing: the message counts as delivered."""

    def status(self, entity) -> str:
        return "idle"


@hookimpl
def register_delivery_backends(register) -> None:
    """Contribute the ``noop`` backend."""
    register("noop", NoopBackend)
