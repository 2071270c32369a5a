"""Where the gateway's local socket is, when the environment alone says so.

Shared by :func:`bridgecli.paths.gateway_socket` and the click-free fast path
(:mod:`bridgecli.fast_send`), which must not import ``pathlib`` or ``platformdirs``: both
answer from this one function, and only a location that needs platformdirs is left to
``paths``.
"""

from __future__ import annotations

import os

APP = "bridge"  #: the application directory name under every XDG base (bridgecli.paths uses it)
SOCKET_NAME = "gateway.sock"


def from_environment() -> str | None:
    """``BRIDGE_GATEWAY_SOCKET``, else ``$XDG_RUNTIME_DIR/bridge/gateway.sock`` when that
    directory exists; None when only platformdirs knows."""
    override = os.environ.get("BRIDGE_GATEWAY_SOCKET")
    if override:
        return override
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return os.path.join(xdg, APP, SOCKET_NAME)
    return None
