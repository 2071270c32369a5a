"""The client side of ``send``/``ask``/``reply``/``answer``: one orchestration for every caller.

The click commands (:mod:`bridgecli.cli.send`), the click-free fast path
(:mod:`bridgecli.fast_send`) and the MCP tools (:mod:`bridgecli.mcp.messaging_tools`) only map
their input to a :class:`~bridgecli.requests.SendRequest` (which checks it) and call :func:`send`
here, so a send is sent, shown and confirmed the same way whoever asked. Imported by the fast
path: nothing heavier than ``sys`` at import, and ``json`` only when ``--json`` asks for it.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from bridgecli.requests import SendRequest
    from bridgecli.results import SendResult
    from bridgecli.session import HostSession


def send(session: HostSession, request: SendRequest, show: Callable[[SendResult], None] | None = None) -> SendResult:
    """Send ``request`` through ``session``, hand the result to ``show``, then confirm it and
    return it. A reply waited for leaves the gateway's hold only once shown: if this process
    dies before, the gateway holds it again for a later poll."""
    result = session.send(request)
    if show is not None:
        show(result)
    session.confirm(result)
    return result


def printer(as_json: bool, write: Callable[[str], Any], note: Callable[[str], Any]) -> Callable[[SendResult], None]:
    """``show`` for :func:`send` on a terminal: the result's :func:`lines` through ``write``
    (stdout) and ``note`` (stderr), then stdout flushed, so "shown" means written out."""

    def show(result: SendResult) -> None:
        out, err = lines(result, as_json)
        for text in out:
            write(text)
        for text in err:
            note(text)
        sys.stdout.flush()

    return show


def lines(result: SendResult, as_json: bool) -> tuple[list[str], list[str]]:
    """What a send-like command prints for ``result``: (stdout lines, stderr lines)."""
    err = []
    if result.registered is not None:  # a first send from a plain shell: say who it went as
        from bridgecli.sender import registered_note

        err.append(registered_note(result.registered, "send"))
    if as_json:
        import json  # only here: it imports re, a third of a send's start-up

        return [json.dumps(result.shown(), indent=2, ensure_ascii=False, default=str)], err
    reply = result.reply
    if reply is not None:
        return [reply.content], [*err, f"reply {reply.msg_id} from {reply.sender_label or reply.sender}"]
    return list(result.ids), err
