"""How a failed command ends: the one line printed and the exit code, for every exception.

Shared by the click CLI's entry point and the click-free fast path (:mod:`bridgecli.fast_send`),
so a failure exits with the same code and text whichever path ran the command. Imports only
:mod:`bridgecli.errors`.
"""

from __future__ import annotations

import os

from bridgecli.errors import BridgeError, ExitCode


def wants_traceback(argv: list[str]) -> bool:
    """``--traceback`` on the command line or ``BRIDGE_DEBUG`` set: let errors propagate."""
    return "--traceback" in argv or os.environ.get("BRIDGE_DEBUG", "") not in ("", "0")


def outcome(exc: BaseException, *, traceback: bool) -> tuple[int, str | None]:
    """``(exit code, line for stderr or None)`` for ``exc``; re-raises it when ``traceback``
    asks for the full trace of a bridge error or a bug."""
    if isinstance(exc, KeyboardInterrupt):
        return int(ExitCode.INTERRUPTED), "bridge: interrupted"
    if isinstance(exc, BrokenPipeError):  # `bridge ... | head`: the reader left, not a failure
        return int(ExitCode.OK), None
    if traceback and isinstance(exc, Exception):
        raise exc
    if isinstance(exc, BridgeError):
        return int(exc.exit_code), f"bridge: error: {exc}"
    if isinstance(exc, Exception):
        return int(ExitCode.FAILURE), (
            f"bridge: internal error: {type(exc).__name__}: {exc} — this is a bug; rerun with --traceback and report it"
        )
    raise exc
