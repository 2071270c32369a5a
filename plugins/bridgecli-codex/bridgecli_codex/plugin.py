"""Entry point ``codex``: registers the ``codex`` delivery backend and launcher, and declares
their settings.

Nothing is imported until a factory runs, so ``bridge --help`` never pays for this plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bridgecli import hookimpl


def _backend(context: Any) -> Any:
    from bridgecli_codex.backend import CodexBackend

    return CodexBackend.from_context(context)


def _launcher(config: Any) -> Any:
    from bridgecli_codex.launcher import CodexLauncher

    return CodexLauncher.from_config(config)


@hookimpl
def register_delivery_backends(register: Callable[..., None]) -> None:
    register("codex", _backend)


@hookimpl
def register_launchers(register: Callable[..., None]) -> None:
    register("codex", _launcher)


@hookimpl
def register_profile_settings(register: Callable[..., None]) -> None:
    register("codex", "bridgecli_codex.settings:PROFILE_SETTINGS")


@hookimpl
def register_plugin_settings(register: Callable[..., None]) -> None:
    register("codex", "bridgecli_codex.settings:PLUGIN_SETTINGS")
