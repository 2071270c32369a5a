"""The ``bridge`` command line. The click root group lives in :mod:`bridgecli.cli.app`.

This package prints to the terminal and exits (with :mod:`bridgecli.fast_send`); library code
raises :class:`bridgecli.errors.BridgeError`. Importing the package itself imports nothing, so
the click-free paths (:mod:`bridgecli.cli.fastpath`: TAB completion and ``bridge --help``) can
use its modules without paying for click; ``root``, ``main`` and ``BUILTIN_COMMANDS`` load
:mod:`bridgecli.cli.app` on first access.
"""

from __future__ import annotations

_FROM_APP = ("root", "main", "BUILTIN_COMMANDS", "AppContext", "CONTEXT_SETTINGS")


def __getattr__(name: str):
    if name in _FROM_APP:
        from bridgecli.cli import app

        return getattr(app, name)
    raise AttributeError(f"module 'bridgecli.cli' has no attribute {name!r}")
