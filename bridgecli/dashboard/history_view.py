"""The search box's backend: the user's text checked and bounded, then the local gateway's
``history`` operation (this host's archive, every local entity's messages) asked with it.

Why bounded here: the text comes from a page and the answer goes back to one, so the query
length, the number of rows and each row's size are capped before anything reaches the gateway
or the page. Content is passed on as it was archived; the page writes it as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bridgecli import channels as channels_mod
from bridgecli.errors import BridgeError, ExitCode

#: the longest search text accepted (the page's input holds no more either)
MAX_QUERY = 200
#: the most messages one search answers with
MAX_RESULTS = 100
#: characters of each message's content sent to the page (the rest is marked truncated)
CONTENT_CHARS = 2000
#: the fields of an archived message the page gets
FIELDS = ("msgId", "copyOf", "owner", "from", "fromLabel", "fromHost", "to", "channel", "kind", "inReplyTo")
_HTTP_STATUS = {
    ExitCode.GATEWAY_UNAVAILABLE: 503,
    ExitCode.BROKER_UNAVAILABLE: 503,
    ExitCode.TIMEOUT: 504,
    ExitCode.BAD_CHANNEL: 400,
    ExitCode.CONFIG: 409,  # history is off on this host: the message says how to turn it on
}


class Refused(ValueError):
    """The query cannot be asked: its message says why (an HTTP 400)."""


def request_fields(params: Mapping[str, str]) -> dict[str, Any]:
    """The ``history`` request for the query parameters ``q`` (search text, at most
    :data:`MAX_QUERY` characters; empty: the newest messages), ``channel`` (a name, ``#``
    allowed) and ``limit`` (at most :data:`MAX_RESULTS`); :class:`Refused` when one is bad."""
    text = (params.get("q") or "").strip()
    if len(text) > MAX_QUERY:
        raise Refused(f"the search text is longer than {MAX_QUERY} characters")
    fields: dict[str, Any] = {"limit": MAX_RESULTS}
    if text:
        fields["search"] = text
    channel = params.get("channel") or ""
    if channel:
        name = channel[1:] if channel.startswith(channels_mod.MARK) else channel
        if not channels_mod.valid_name(name):
            raise Refused("channel must be a channel name")
        fields["channel"] = name
    limit = params.get("limit")
    if limit:
        if not limit.isdigit() or int(limit) < 1:
            raise Refused("limit must be a positive whole number")
        fields["limit"] = min(int(limit), MAX_RESULTS)
    return fields


def rows(messages: list[Any]) -> list[dict[str, Any]]:
    """The page's rows, newest first: one per message (a channel copy and the original, or
    the sent and received records of one local exchange, are one row whose ``directions``
    lists both), with the content cut to :data:`CONTENT_CHARS`."""
    out: list[dict[str, Any]] = []
    by_message: dict[str, dict[str, Any]] = {}
    for message in messages:
        if not isinstance(message, dict):
            continue
        key = str(message.get("copyOf") or message.get("msgId"))
        direction = str(message.get("direction"))
        if key in by_message:
            seen = by_message[key]["directions"]
            if direction not in seen:
                seen.append(direction)
            continue
        row = {name: message.get(name) for name in FIELDS}
        content = str(message.get("content") or "")
        row.update(content=content[:CONTENT_CHARS], truncated=len(content) > CONTENT_CHARS, directions=[direction])
        ts = message.get("ts")
        row["ts"] = ts if isinstance(ts, (int, float)) else None
        by_message[key] = row
        out.append(row)
    return out


def search(fields: dict[str, Any], socket_path: str | None = None) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of asking the local gateway's ``history`` with ``fields``
    (:func:`request_fields`): ``{"messages": rows(...)}``, or ``{"error"}`` when no gateway
    listens, it has no such operation (an older gateway: 502 with its hint), or it refused."""
    from bridgecli.gateway.client import GatewayClient

    client = GatewayClient.connect(socket_path, timeout=1.0)
    if client is None:
        return 503, {"error": "no local gateway: the message history is kept by this host's `bridge gateway`"}
    try:
        with client:
            answer = client.call("history", timeout=10, **fields)
    except BridgeError as exc:  # Rejected from a gateway without the operation: its hint says so
        text = exc.message + (f" ({exc.hint})" if exc.hint else "")
        return _HTTP_STATUS.get(ExitCode(exc.exit_code), 502), {"error": text}
    return 200, {"messages": rows(answer.get("messages") or [])[:MAX_RESULTS]}
