"""The untrusted-text rule (docs/security.md): properties of bridgecli.sanitize."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bridgecli.sanitize import UNSAFE, is_inert, sanitize, sanitize_line


def _control(ch: str) -> bool:
    code = ord(ch)
    return (code < 0x20 and ch not in "\n\t") or code == 0x7F or 0x80 <= code <= 0x9F


@given(st.text())
def test_output_never_contains_a_control_character(text: str) -> None:
    out = sanitize(text)
    assert not any(_control(ch) for ch in out)
    assert is_inert(out)
    out.encode("utf-8")  # lone surrogates are gone too


@given(st.text())
def test_idempotent(text: str) -> None:
    once = sanitize(text)
    assert sanitize(once) == once


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Cf")) | st.sampled_from("\n\t")))
def test_printable_text_is_unchanged(text: str) -> None:
    assert sanitize(text) == text


@given(st.text())
def test_length_is_preserved(text: str) -> None:
    # one visible stand-in per neutralised character: nothing is silently dropped
    assert len(sanitize(text)) == len(text)


def test_escape_sequences_become_visible_text() -> None:
    hostile = "a\x1b[201~\n touch /tmp/PWNED\r\x03\x1b]52;c;aGk=\x07\x9b31m\x7f"
    out = sanitize(hostile)
    assert out == "a␛[201~\n touch /tmp/PWNED␍␃␛]52;c;aGk=␇\ufffd31m␡"
    assert "\x1b" not in out and "\r" not in out


def test_bidi_overrides_are_replaced() -> None:
    assert sanitize("ok\u202eevil\u2066x") == "ok\ufffdevil\ufffdx"


def test_sanitize_line_folds_and_cuts() -> None:
    assert sanitize_line("a\nb\tc\x1b") == "a␤b c␛"
    assert sanitize_line("abcdef", max_chars=4) == "abc…"
    assert sanitize_line("abc", max_chars=4) == "abc"


def test_unsafe_table_covers_all_c0_c1() -> None:
    expected = {c for c in range(0xA0) if _control(chr(c))}
    assert expected <= UNSAFE
    assert ord("\n") not in UNSAFE and ord("\t") not in UNSAFE
