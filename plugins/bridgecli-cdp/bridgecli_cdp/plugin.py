"""Entry point of the ``cdp`` plugin: registers the ``cdp`` browser target and declares its
settings.

Nothing heavy is imported here; ``websocket-client`` loads only when a target is built.
"""

from __future__ import annotations

from bridgecli import hookimpl


def _factory(config):
    from bridgecli_cdp.target import CdpTarget

    return CdpTarget(config.plugin_settings("cdp") if config is not None else {})


@hookimpl
def register_browser_targets(register) -> None:
    register("cdp", _factory)


@hookimpl
def register_plugin_settings(register) -> None:
    register("cdp", "bridgecli_cdp.settings:PLUGIN_SETTINGS")
