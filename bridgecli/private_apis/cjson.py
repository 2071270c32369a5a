"""``json.loads`` and ``json.dumps`` on CPython's ``_json`` accelerator, without importing ``json``.

Relies on ``_json``, the undocumented C module behind ``json``: ``make_scanner`` built from any
object with ``JSONDecoder``'s attributes, raising ``StopIteration(index)`` where no value
starts; ``make_encoder``'s nine positional arguments; ``encode_basestring(_ascii)``. Gains:
``json`` imports ``re`` and ``enum``, a third of a click-free command's start-up
(docs/decisions/start-without-re.md). Importing this module raises ImportError without
``_json``. If ``_json`` changes, ``tests/private_apis/test_cjson.py`` fails: follow the new
``json.scanner`` and ``json.encoder``, or let :mod:`bridgecli.wirejson` use ``json``.
"""

from __future__ import annotations

import _json

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing imports re
    from collections.abc import Callable
    from typing import Any

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Options:
    """What ``_json``'s scanner reads off ``json.JSONDecoder``: its defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


def _no_default(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_scan = _json.make_scanner(_Options())  # type: ignore[arg-type]  # typeshed wants a JSONDecoder: any object with its attributes does


def _encoder(encode_string: Callable[[str], str], separators: tuple[str, str], default: Any) -> Any:
    """``_json``'s C encoder with ``json.dumps``'s other defaults and no circular check."""
    item, key = separators
    return _json.make_encoder(None, default, encode_string, None, key, item, False, False, True)


_compact = _encoder(_json.encode_basestring_ascii, (",", ":"), _no_default)


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``; ValueError when ``text`` is not one JSON value."""
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8")
    text = text.strip(_WHITESPACE)
    try:
        value, end = _scan(text, 0)
    except StopIteration as stop:
        raise ValueError(f"Expecting value: char {stop.value}") from None
    if end != len(text):
        raise ValueError(f"Extra data: char {end}")
    return value


def dumps_compact(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"))``, for dicts and lists."""
    if not isinstance(value, (dict, list)):
        raise TypeError("only a dict or a list")
    return "".join(_compact(value, 0))


def text_encoder(separators: tuple[str, str], default: Callable[[Any], Any] | None = None) -> Callable[[Any], str]:
    """A function that writes a dict or list as ``json.dumps(value, ensure_ascii=False,
    separators=separators, default=default)`` does, without the check for circular
    references (for values with none). Why: ``json.dumps`` builds its encoder at every call."""
    encode = _encoder(_json.encode_basestring, separators, default or _no_default)
    return lambda value: "".join(encode(value, 0))
