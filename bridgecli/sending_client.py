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
    from bridgecli.session import HostSession


def send(session: HostSession, request: SendRequest, show: Callable[[Any], None] | None = None) -> Any:
    """Send ``request`` through ``session``, hand the result to ``show``, then confirm it and
    return it. A reply waited for leaves the gateway's hold only once shown: if this process
    dies before, the gateway holds it again for a later poll."""
    result = session.send(request)
    if show is not None:
        show(result)
    session.confirm(result)
    return result


def printer(as_json: bool, write: Callable[[str], Any], note: Callable[[str], Any]) -> Callable[[Any], None]:
    """``show`` for :func:`send` on a terminal: the result's :func:`lines` through ``write``
    (stdout) and ``note`` (stderr), then stdout flushed, so "shown" means written out."""

    def show(result: Any) -> None:
        out, err = lines(result, as_json)
        for text in out:
            write(text)
        for text in err:
            note(text)
        sys.stdout.flush()

    return show


def lines(result: dict[str, Any], as_json: bool) -> tuple[list[str], list[str]]:
    """What a send-like command prints for ``result``: (stdout lines, stderr lines)."""
    err = []
    if result.get("registered"):  # a first send from a plain shell: say who it went as
        from bridgecli.sender import registered_note

        err.append(registered_note(result["registered"], "send"))
    if as_json:
        import json  # only here: it imports re, a third of a send's start-up

        shown = {k: v for k, v in result.items() if k != "pending"}
        return [json.dumps(shown, indent=2, ensure_ascii=False, default=str)], err
    if "reply" in result:
        reply = result["reply"]
        return [reply["content"]], [*err, f"reply {reply['msgId']} from {reply.get('fromLabel') or reply['from']}"]
    if "msgIds" in result:
        return list(result["msgIds"]), err
    return [result["msgId"]], err
