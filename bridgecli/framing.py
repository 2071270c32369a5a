"""What an agent sees when a message is typed into its terminal (``docs/security.md``, "Frame").

A *frame* is a header naming sender, kind and message id, the command that answers it, the
sanitised content behind a gutter (so content never passes for a frame line), and an end
line; long content is cut, saying how to read it all. The header starts with the
**marker** ``[bridge <first 8 hex of msgId>]``, which backends find in the pane to confirm
delivery. No line starts with ``/``, ``!``, ``#`` or ``@`` (TUI commands); with
``line_prefix="# "`` each line is a shell comment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bridgecli.sanitize import sanitize, sanitize_line

if TYPE_CHECKING:
    from bridgecli.envelope import Envelope

#: default cut for the content shown inline, in UTF-8 bytes
DEFAULT_MAX_BYTES = 8192
#: default cut for the number of content lines shown inline
DEFAULT_MAX_LINES = 200
GUTTER = "│ "
#: what a shell-safe frame puts before every line (a shell comment)
SHELL_PREFIX = "# "


@dataclass(frozen=True)
class Frame:
    """A rendered message. ``lines[0]`` is the header (it carries :attr:`marker`)."""

    msg_id: str
    marker: str
    lines: tuple[str, ...]
    truncated: bool

    @property
    def header(self) -> str:
        return self.lines[0]

    @property
    def body(self) -> str:
        """Every line after the header, joined with LF (what a backend pastes)."""
        return "\n".join(self.lines[1:])

    @property
    def text(self) -> str:
        """The whole frame, LF-separated, without a trailing newline."""
        return "\n".join(self.lines)

    def one_line(self, separator: str = "  ⏎  ") -> str:
        """The frame folded onto one line, for targets without bracketed paste where any
        newline would submit early."""
        return separator.join(self.lines)


def marker(msg_id: str) -> str:
    """The short, greppable tag that starts a frame's header: ``[bridge 6f1c2a3b]``."""
    return f"[bridge {sanitize_line(msg_id)[:8]}]"


def answer_command(envelope: Envelope) -> str:
    """The exact command that answers ``envelope``: ``bridge answer`` for an ASK (whose
    sender may be blocked waiting), ``bridge reply`` for everything else."""
    verb = "answer" if envelope.kind == "ASK" else "reply"
    return f'bridge {verb} {sanitize_line(envelope.msg_id)} "..."'


def _cut(content: str, max_bytes: int, max_lines: int) -> tuple[str, int, int]:
    """Cut ``content`` to at most ``max_bytes`` UTF-8 bytes and ``max_lines`` lines.

    Returns (shown, bytes left out, lines left out)."""
    raw = content.encode("utf-8")
    shown = raw[:max_bytes].decode("utf-8", "ignore") if len(raw) > max_bytes else content
    lines = shown.split("\n")
    if len(lines) > max_lines:
        shown = "\n".join(lines[:max_lines])
    left_bytes = len(raw) - len(shown.encode("utf-8"))
    left_lines = content.count("\n") - shown.count("\n")
    return shown, left_bytes, left_lines


def render(
    envelope: Envelope,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_lines: int = DEFAULT_MAX_LINES,
    line_prefix: str = "",
) -> Frame:
    """Render ``envelope`` as the frame an agent sees (see the module docstring).

    Everything that came from the sender — content, label, host, ids — goes through
    :mod:`bridgecli.sanitize` here, so a backend that types :attr:`Frame.text` never types a
    control character. ``line_prefix`` is put before every line (``SHELL_PREFIX`` for panes
    whose foreground program is a shell).
    """
    msg_id = sanitize_line(envelope.msg_id, max_chars=64)
    tag = marker(envelope.msg_id)
    label = sanitize_line(envelope.sender_label or "?", max_chars=64)
    sender = sanitize_line(envelope.sender, max_chars=64)
    where = f" on {sanitize_line(envelope.sender_host, max_chars=64)}" if envelope.sender_host else ""
    kind = sanitize_line(envelope.kind, max_chars=16)
    # The header ends with the message id on purpose: tmux treats an argv element that ends
    # in ";" as a command separator, and the header is passed as one.
    header = f"{tag} {kind} from {label} (gid {sender}){where} · msg {msg_id}"
    lines = [header]
    if envelope.in_reply_to:
        lines.append(f"in reply to: {sanitize_line(envelope.in_reply_to, max_chars=64)}")
    lines.append(f"answer with: {answer_command(envelope)}")

    shown, left_bytes, left_lines = _cut(envelope.content, max(max_bytes, 0), max(max_lines, 1))
    truncated = left_bytes > 0
    if shown or not truncated:
        body = sanitize(shown).split("\n") if shown else ["(empty message)"]
        lines.extend(GUTTER + line for line in body)
    if truncated:
        more = f"{left_bytes} more bytes"
        if left_lines > 0:
            more += f", {left_lines} more lines"
        lines.append(f"[cut: {more} — read all of it with: bridge show {msg_id}]")
    lines.append(f"[end {tag[1:]}")
    if line_prefix:
        lines = [line_prefix + line for line in lines]
    return Frame(msg_id=msg_id, marker=tag, lines=tuple(lines), truncated=truncated)
