"""Entry point ``opencode``: registers the ``opencode`` delivery backend and launcher, and
declares their settings.

Nothing is imported until a factory runs, so ``bridge --help`` never pays for this plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bridgecli import hookimpl


def _backend(context: Any) -> Any:
    from bridgecli_opencode.backend import OpenCodeBackend

    return OpenCodeBackend.from_context(context)


def _launcher(config: Any) -> Any:
    from bridgecli_opencode.launcher import OpenCodeLauncher

    return OpenCodeLauncher.from_config(config)


@hookimpl
def register_delivery_backends(register: Callable[..., None]) -> None:
    register("opencode", _backend)


@hookimpl
def register_launchers(register: Callable[..., None]) -> None:
    register("opencode", _launcher)


@hookimpl
def register_profile_settings(register: Callable[..., None]) -> None:
    register("opencode", "bridgecli_opencode.settings:PROFILE_SETTINGS")


@hookimpl
def register_plugin_settings(register: Callable[..., None]) -> None:
    register("opencode", "bridgecli_opencode.settings:PLUGIN_SETTINGS")
