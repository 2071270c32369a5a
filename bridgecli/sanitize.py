"""Make untrusted message text inert before it reaches a terminal (docs/design.md#invariant-11).

A terminal takes some characters as input: CR submits a line, ETX is Ctrl-C, ESC starts a
sequence, and ``ESC[201~`` ends a bracketed paste, after which the rest would be typed as
keystrokes. So, without exception, **no control character except LF and TAB ever leaves this
module**. One :meth:`str.translate` table maps C0, DEL, C1, lone surrogates and bidi
overrides to visible replacements (the table: ``docs/security.md``, "Neutralise"). Every
replacement is printable and never mapped again, so :func:`sanitize` is idempotent.
"""

from __future__ import annotations

#: Characters kept as they are although they are C0 controls: a message may have lines
#: and indentation. Delivery backends still decide how a newline reaches the pane.
KEPT = frozenset("\n\t")

_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]


def _table() -> dict[int, str]:
    table: dict[int, str] = {}
    for code in range(0x20):
        if chr(code) not in KEPT:
            table[code] = chr(0x2400 + code)  # U+2400 CONTROL PICTURES block
    table[0x7F] = "\u2421"  # ␡
    for code in range(0x80, 0xA0):
        table[code] = "\ufffd"
    for code in range(0xD800, 0xE000):
        table[code] = "\ufffd"
    for code in _BIDI:
        table[code] = "\ufffd"
    return table


_TABLE = _table()
#: every code point :func:`sanitize` removes; tests and assertions use it
UNSAFE = frozenset(_TABLE)


def sanitize(text: str) -> str:
    """Return ``text`` with every terminal control character replaced by a visible stand-in.

    LF and TAB survive; everything in the module table becomes a printable character. Pure,
    idempotent, and the identity on printable text.
    """
    return text.translate(_TABLE)


def sanitize_line(text: str, *, max_chars: int | None = None) -> str:
    """Like :func:`sanitize`, and also fold the text onto one line.

    For labels, host names and other short fields that sit inside a frame's header: a
    newline there would let a sender forge extra header lines. LF becomes ``␤`` and TAB a
    space; ``max_chars`` cuts long values with ``…``.
    """
    line = sanitize(text).replace("\n", "\u2424").replace("\t", " ")
    if max_chars is not None and len(line) > max_chars:
        line = line[: max(max_chars - 1, 0)] + "…"
    return line


def is_inert(text: str) -> bool:
    """True when ``text`` holds no character that :func:`sanitize` would replace."""
    return not any(ord(ch) in UNSAFE for ch in text)
