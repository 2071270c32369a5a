"""A :class:`~bridgecli.errors.BridgeError` on the wire and back: the one codec of the local
socket's error answers and of control answers.

``{"code": EXITCODE_NAME, "message": ..., "hint": ..., "type": CLASS_NAME}``: the receiving side
rebuilds the same class (:func:`bridgecli.errors.error_class`), so the CLI exits with the code the
gateway meant and can tell, say, an unconfirmed publish from an unreachable broker.
"""

from __future__ import annotations

from typing import Any

from bridgecli.errors import BridgeError, ExitCode, error_class


def to_wire(exc: BridgeError) -> dict[str, Any]:
    """The error as a JSON-ready object."""
    return {"code": ExitCode(exc.exit_code).name, "message": exc.message, "hint": exc.hint, "type": type(exc).__name__}


def from_wire(payload: dict[str, Any]) -> BridgeError:
    """The typed error a peer sent; an unknown or missing code is a plain :class:`BridgeError`."""
    name = payload.get("type")
    kind = error_class(str(payload.get("code")), name if isinstance(name, str) else None)
    return kind(str(payload.get("message", "gateway error")), payload.get("hint"))
