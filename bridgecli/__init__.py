"""bridge: cross-host messaging for AI coding agents, and a browser bridge.

The public surface for plugin authors is small on purpose: ``hookimpl`` to mark hook
implementations, ``__version__``, and the error types in :mod:`bridgecli.errors`.
Nothing heavy (pika, WebSocket libraries) is imported here, because ``bridge --version``
and shell completion go through this module.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~10 % of the click-free `bridge send` (bridgecli.fast_send)
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "hookimpl"]


def __getattr__(name: str) -> Any:
    """``hookimpl`` (the marker for plugin hook implementations, ``@bridgecli.hookimpl``) is
    created on first use, so ``bridge --version`` does not import pluggy."""
    if name == "hookimpl":
        import pluggy

        marker = pluggy.HookimplMarker("bridgecli")
        globals()["hookimpl"] = marker
        return marker
    raise AttributeError(f"module 'bridgecli' has no attribute {name!r}")
