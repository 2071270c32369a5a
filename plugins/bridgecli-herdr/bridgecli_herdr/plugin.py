"""Entry point ``herdr``: registers the ``herdr`` delivery backend and launcher, and declares
their settings.

Nothing is imported until a factory runs, so ``bridge --help`` never pays for this plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bridgecli import hookimpl


def _backend(context: Any) -> Any:
    from bridgecli_herdr.backend import HerdrBackend

    return HerdrBackend.from_context(context)


def _launcher(config: Any) -> Any:
    from bridgecli_herdr.launcher import HerdrLauncher

    return HerdrLauncher.from_config(config)


@hookimpl
def register_delivery_backends(register: Callable[..., None]) -> None:
    register("herdr", _backend)


@hookimpl
def register_launchers(register: Callable[..., None]) -> None:
    register("herdr", _launcher)


@hookimpl
def register_profile_settings(register: Callable[..., None]) -> None:
    register("herdr", "bridgecli_herdr.settings:PROFILE_SETTINGS")


@hookimpl
def register_plugin_settings(register: Callable[..., None]) -> None:
    register("herdr", "bridgecli_herdr.settings:PLUGIN_SETTINGS")
