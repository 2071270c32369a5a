"""The ``exec`` delivery backend: pipe each message as JSON to a command (shell-script entities).

``--deliver exec:COMMAND``; delivered means the command exited 0.
"""

from __future__ import annotations

from bridgecli import hookimpl
from bridgecli.interfaces import BackendContext, DeliveryBackend


def _factory(context: BackendContext) -> DeliveryBackend:
    from bridgecli.gateway.exec_delivery import ExecBackend

    return ExecBackend(context)


@hookimpl
def register_delivery_backends(register) -> None:
    register("exec", _factory)
