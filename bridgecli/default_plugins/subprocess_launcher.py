"""The ``subprocess`` launcher: start a headless agent as a child process of the gateway."""

from __future__ import annotations

from bridgecli import hookimpl


def _factory(config):
    from bridgecli.gateway.subprocess_launch import SubprocessLauncher

    return SubprocessLauncher(config)


@hookimpl
def register_launchers(register) -> None:
    register("subprocess", _factory)


@hookimpl
def register_profile_settings(register) -> None:
    register("subprocess", "bridgecli.gateway.subprocess_launch:PROFILE_SETTINGS")
