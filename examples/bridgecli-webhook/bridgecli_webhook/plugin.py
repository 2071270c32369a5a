"""Entry point ``webhook``: registers the ``webhook`` delivery backend and ``bridge webhook-test``.

This module is imported whenever bridge loads plugins — also for ``bridge --help`` and every
TAB — so it only registers names and factories. The backend module (and urllib) is imported
by the factory, the command module only when the command runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bridgecli import hookimpl


def _backend(context: Any) -> Any:
    from bridgecli_webhook.backend import WebhookBackend

    return WebhookBackend.from_context(context)


@hookimpl
def register_delivery_backends(register: Callable[..., None]) -> None:
    register("webhook", _backend)


@hookimpl
def register_commands(register: Callable[..., None]) -> None:
    register(
        "webhook-test",
        "bridgecli_webhook.command:webhook_test",
        "POST a sample message to a webhook URL and report what bridge would do.",
    )


@hookimpl
def register_plugin_settings(register: Callable[..., None]) -> None:
    register("webhook", "bridgecli_webhook.backend:PLUGIN_SETTINGS")
