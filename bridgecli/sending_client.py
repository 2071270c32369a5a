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

    from bridgecli.errors import BridgeError
    from bridgecli.requests import SendRequest
    from bridgecli.results import SendResult
    from bridgecli.session import HostSession


#: tries of one send whose confirm was lost (:class:`~bridgecli.errors.Unconfirmed`)
ATTEMPTS = 4


def send(
    session: HostSession,
    request: SendRequest,
    show: Callable[[SendResult], None] | None = None,
    pause: Callable[[float], None] | None = None,
) -> SendResult:
    """Send ``request`` through ``session``, hand the result to ``show``, then confirm it and
    return it. Its ids are fixed first (:meth:`~bridgecli.requests.SendRequest.pinned`), so a
    send whose confirm was lost is retried (:func:`retried`) and delivered once. A reply waited
    for leaves the gateway's hold only once shown: if this process dies before, it is held again."""
    request = request.pinned()
    try:
        result = session.send(request)
    except Exception as exc:
        from bridgecli.errors import Unconfirmed  # only now: its enum costs the fast path ~2 ms

        if not isinstance(exc, Unconfirmed):
            raise
        result = retried(session, request, exc, pause)
    if show is not None:
        show(result)
    session.confirm(result)
    return result


def retried(
    session: HostSession, request: SendRequest, first: BridgeError, pause: Callable[[float], None] | None = None
) -> SendResult:
    """Try ``request`` again, up to :data:`ATTEMPTS` tries in all, with jittered exponential
    backoff (``pause``: :func:`time.sleep`), after its first try failed with ``first``
    (unconfirmed). A broker error after that is retried as well, since the earlier try may
    have arrived; any other error ends it. The last failure says how to resend safely."""
    import time

    import tenacity

    from bridgecli.errors import BrokerUnavailable, TlsError, Unconfirmed

    again = request.but(fresh_id=False)  # it may have arrived: its reply may be held already
    sleep = pause or time.sleep
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(ATTEMPTS - 1),
        wait=tenacity.wait_random_exponential(multiplier=0.2, max=2),
        retry=tenacity.retry_if_exception(
            lambda exc: isinstance(exc, BrokerUnavailable) and not isinstance(exc, TlsError)
        ),
        sleep=sleep,
        reraise=True,
    )
    sleep(0.1)
    try:
        return retrying(session.send, again)
    except BrokerUnavailable as exc:
        if isinstance(exc, TlsError):
            raise
        how = f"--id {again.new_id}" if again.key is None else f"--key {again.key}"
        raise Unconfirmed(
            f"{exc.message} ({ATTEMPTS} tries; the first one's confirm was lost: {first.message})",
            f"it may or may not have been delivered: rerun with {how} (a repeat is dropped)",
        ) from None


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
