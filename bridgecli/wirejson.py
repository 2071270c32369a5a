"""JSON for the commands that start without click (a send through the gateway, TAB, ``--help``).

The standard ``json`` package imports ``re`` and, through it, ``enum``: about a third of such a
command's start-up. On CPython these functions are :mod:`bridgecli.private_apis.cjson`'s, the
same C code ``json`` runs without importing either; without ``_json`` they are ``json``'s. Only
UTF-8 text and default options are supported.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing imports re
    from collections.abc import Callable
    from typing import Any

__all__ = ["dumps_compact", "loads", "text_encoder"]

try:
    from bridgecli.private_apis.cjson import dumps_compact, loads, text_encoder
except ModuleNotFoundError as missing:  # pragma: no cover - CPython always has _json
    if missing.name != "_json":
        raise
    import json as _std

    def loads(text: str | bytes) -> Any:
        return _std.loads(text)

    def dumps_compact(value: Any) -> str:
        return _std.dumps(value, separators=(",", ":"))

    def text_encoder(separators: tuple[str, str], default: Callable[[Any], Any] | None = None) -> Callable[[Any], str]:
        return _std.JSONEncoder(ensure_ascii=False, separators=separators, default=default).encode
