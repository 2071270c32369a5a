"""How messages read to the model behind an MCP client.

Message content is *untrusted data* written by another agent. Each message is a frame: a
header naming kind, sender and id, the tool call that answers it, then the content with every
line behind a gutter — so nothing inside a message can pass for a frame line (for example a
forged "reply from main" header). The structured copy of the same message travels in the
tool result's data, unframed, for clients that read JSON.
"""

from __future__ import annotations

import datetime

from bridgecli.results import Message
from bridgecli.sanitize import sanitize, sanitize_line

GUTTER = "│ "


def sender(message: Message) -> str:
    """``label@host`` when known, else the short gid."""
    who = message.sender_label or str(message.sender)[:13]
    host = message.sender_host
    return sanitize_line(f"{who}@{host}" if host else who, max_chars=80)


def answer_hint(message: Message) -> str:
    """The tool call that answers ``message`` (ASK → bridge_answer, else bridge_reply)."""
    tool = "bridge_answer" if message.kind == "ASK" else "bridge_reply"
    return f'{tool}(msg_id="{message.msg_id}", content=...)'


def frame(message: Message) -> str:
    """One message as a framed block of text."""
    ts = message.ts
    when = datetime.datetime.fromtimestamp(ts).strftime("%H:%M:%S") if isinstance(ts, (int, float)) else "?"
    header = f"[bridge] {message.kind} from {sender(message)} at {when} · msg {message.msg_id}"
    if message.in_reply_to:
        header += f" (re {message.in_reply_to})"
    lines = [header]
    if message.kind in ("SEND", "ASK"):
        lines.append(f"answer with: {answer_hint(message)}")
    content = sanitize(str(message.content))
    lines.extend(GUTTER + line for line in content.split("\n"))
    lines.append("[end bridge]")
    return "\n".join(lines)


def frames(messages: list[Message]) -> str:
    return "\n\n".join(frame(m) for m in messages)
