"""The keys of ``[plugins.cdp]``, declared so that ``bridge config set`` can check them."""

from __future__ import annotations

from bridgecli.config import Setting


def _as_list(value: str | list[str]) -> list[str]:
    # the target iterates args: one flag given as a plain string must not become characters
    return [value] if isinstance(value, str) else value


PLUGIN_SETTINGS = (
    Setting("binary", str, None, "Chromium executable (default: BRIDGE_CHROMIUM, else found on PATH)."),
    Setting("args", list, None, 'Extra Chromium flags, e.g. ["--lang=en"].', check=_as_list),
)
