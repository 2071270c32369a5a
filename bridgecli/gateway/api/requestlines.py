"""The local API's two edges: a request line read into its operation and fields, and an
operation's outcome written as its response. The loop and the API workers serve requests
through the same ones."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from bridgecli import wirejson
from bridgecli.error_wire import to_wire as error_to_wire
from bridgecli.errors import BridgeError, Rejected
from bridgecli.gateway import log as glog
from bridgecli.gateway.api import operations
from bridgecli.gateway.api.contract import WouldWait

logger = logging.getLogger("bridgecli.gateway")

#: the longest request line the gateway reads
MAX_REQUEST_BYTES = 8 * 1024 * 1024
TOO_LARGE_FIX = f"keep requests under {MAX_REQUEST_BYTES} bytes"


def parse_line(line: bytes) -> tuple[str, dict[str, Any]] | dict[str, Any]:
    """(op, request fields) of a request line, or the error response it gets."""
    if len(line) > MAX_REQUEST_BYTES:
        return error_response(Rejected("request too large", TOO_LARGE_FIX))
    try:
        request = wirejson.loads(line)
        if not isinstance(request, dict) or not isinstance(request.get("op"), str):
            raise ValueError("not an object with an 'op'")
    except (ValueError, RecursionError) as exc:
        return error_response(Rejected(f"bad request: {exc}", "send one JSON object per line with an 'op' field"))
    op = request.pop("op")
    if op not in operations.OPS:
        return error_response(
            Rejected(
                f"unknown operation {op!r}", "the CLI and the gateway may be different versions; restart the gateway"
            )
        )
    return op, request


def guarded(op: str, call: Callable[[], Any]) -> Any:
    """``call()``, or the error it raised as a :class:`BridgeError` (a WouldWait as itself)."""
    try:
        return call()
    except (BridgeError, WouldWait) as exc:
        return exc
    except TypeError as exc:
        return Rejected(
            f"bad parameters for {op}: {exc}",
            "check the request fields; after an upgrade of bridge, restart the gateway",
        )
    except Exception as exc:
        glog.event(logger, "local API operation failed", logging.ERROR, op=op, error=f"{type(exc).__name__}: {exc}")
        return BridgeError(f"gateway failed on {op}: {type(exc).__name__}: {exc}", "see the gateway's log")


def response_of(outcome: Any) -> dict[str, Any]:
    if isinstance(outcome, BridgeError):
        return error_response(outcome)
    return {"ok": True, **outcome}


def raiser(error: BaseException) -> Callable[[], None]:
    def call() -> None:
        raise error

    return call


def error_response(exc: BridgeError) -> dict[str, Any]:
    return {"ok": False, "error": error_to_wire(exc)}
