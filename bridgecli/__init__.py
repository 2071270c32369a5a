"""bridge: cross-host messaging for AI coding agents, and a browser bridge.

The public surface for plugin authors is small on purpose: ``hookimpl`` to mark hook
implementations, ``__version__``, and the error types in :mod:`bridgecli.errors`.
Nothing heavy (pika, WebSocket libraries) is imported here, because ``bridge --version``
and shell completion go through this module.
"""

from __future__ import annotations

import pluggy

__version__ = "0.1.0"

#: Marker for plugin hook implementations: ``@bridgecli.hookimpl``.
hookimpl = pluggy.HookimplMarker("bridgecli")

__all__ = ["__version__", "hookimpl"]
