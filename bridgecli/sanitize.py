"""Make untrusted message text inert before it reaches a terminal.

Every message is *data* from another host. A terminal, however, treats some characters as
*input*: ``\\r`` submits a line, ``\\x03`` is Ctrl-C, ESC starts an escape sequence — and
``ESC[201~`` ends a bracketed paste, after which the rest of a message would be typed as
keystrokes (the attack that herdr's own docs warn about, research/herdr.md §5). The rule
(``docs/security.md``) is therefore simple and has no exceptions: **no control character
except LF and TAB ever leaves this module**.

What happens to each character (one table, applied with :meth:`str.translate`):

==========================  =============================================  ==============
input                       why it is dangerous                            becomes
==========================  =============================================  ==============
C0 ``0x00-0x1f`` but LF/TAB  keystrokes (CR, ^C, ^D, ^Z), ESC starts          Control Pictures
                            CSI/OSC/DCS/APC/PM/SOS sequences               ``␀``…``␟`` (ESC → ``␛``)
DEL ``0x7f``                backspace in many line editors                 ``␡``
C1 ``0x80-0x9f``            8-bit CSI (0x9b), OSC (0x9d), DCS (0x90)…      ``�`` (U+FFFD)
lone surrogates             cannot be encoded, would crash the writer      ``�``
bidi overrides/isolates     reorder what the reader sees (Trojan Source,   ``�``
``U+202A-202E, 2066-2069``  CVE-2021-42574): a forged frame line
==========================  =============================================  ==============

The replacement for ESC keeps the rest of a sequence as plain text (``ESC[201~`` shows as
``␛[201~``), so a reader can see that somebody tried. Because every replacement is a
printable character that the table never maps again, :func:`sanitize` is idempotent, and
text that is already printable (plus LF/TAB) passes through unchanged.
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
