"""The messaging tools of ``bridge mcp``: send, ask, reply, answer, poll, track, roster, spawn, stop,
:mod:`.history_tools` and :mod:`.channel_tools`.

Each tool is one gateway operation on behalf of this session's entity (``link.gid``), built
as the same request model the CLI sends (:mod:`bridgecli.requests`), and a send is sent the
CLI's way (:mod:`bridgecli.sending_client`), so the MCP server adds no routing or state of
its own: the gateway validates, resolves labels, publishes and holds, exactly as for
``bridge send`` in a shell. Descriptions are written for the model that reads them: what the
tool does, when to use it, and what comes back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any

from bridgecli import send_ids
from bridgecli.agent_kinds import MAX_PROMPT_BYTES
from bridgecli.errors import Timeout
from bridgecli.mcp import channel_tools, history_tools, render
from bridgecli.mcp.link import GatewayLink
from bridgecli.mcp.push import is_nudge
from bridgecli.mcp.tools import Handler, Tool, ToolRegistry, ToolResult, as_json, object_schema
from bridgecli.requests import PollRequest, RosterRequest, SendRequest, SpawnRequest, StopRequest, TrackRequest
from bridgecli.results import PollResult, RosterResult, SpawnResult, StopResult, TrackResult

#: the longest a tool call may block (seconds); MCP clients time calls out too
MAX_WAIT = 3600

_TARGET = {
    "type": "string",
    "minLength": 1,
    "description": 'Who to message: a label (e.g. "worker"), a global id (gid), or "#NAME" for every '
    "member of a channel (each gets one copy; no wait). Labels resolve through this host's entities "
    "and the roster of all hosts; an ambiguous label is an error that lists the candidates.",
}
_WAIT = {
    "type": "number",
    "minimum": 0,
    "maximum": MAX_WAIT,
    "description": "Seconds to block for the reply (0 or absent: return at once; the reply is then held for "
    "bridge_poll).",
}
_MSG_ID = {
    "type": "string",
    "minLength": 6,
    "description": "The msgId of the message you are answering (as shown by bridge_poll; a unique prefix works).",
}
_CONTENT = {"type": "string", "description": "The message text."}
_KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": send_ids.MAX_KEY_CHARS,
    "pattern": f"^[A-Za-z0-9{send_ids.KEY_PUNCTUATION}]+$",
    "description": "Retry key: calling again with the same key (after an error or a restart) sends the same "
    "message id, so the recipient gets it once while its gateway remembers the id (its last "
    "messaging.dedup_window ids, 100000 by default). Scope: you, across all four send tools.",
}


def register(registry: ToolRegistry, link: GatewayLink) -> None:
    """Add the messaging tools, bound to ``link``'s entity, to ``registry``. Each call first
    makes sure the entity is attached: the server starts without a gateway, and a call made
    before one runs is a one-line tool error that names the fix."""
    for tool in [*_tools(link), *history_tools.tools(link), *channel_tools.tools(link)]:
        registry.add(dataclasses.replace(tool, handler=_attached(link, tool.handler)))


def _attached(link: GatewayLink, handler: Handler) -> Handler:
    async def run(args: dict[str, Any]) -> ToolResult:
        await link.ensure()
        return await handler(args)

    return run


def _tools(link: GatewayLink) -> list[Tool]:
    async def send(command: str, target: str, content: str, wait: float | None, key: str | None) -> ToolResult:
        wait = float(wait or 0)
        request = SendRequest(
            command=command, sender=link.gid, target=target, contents=[content], wait=wait or None, key=key
        )
        try:
            async with link.awaiting_reply() if wait else contextlib.nullcontext():
                result = await link.send(request)
        except Timeout as exc:
            raise Timeout(
                exc.message, "the message was sent; its reply will be held for you — collect it later with bridge_poll"
            ) from None
        expected = "ANSWER" if command == "ask" else "REPLY"
        if result.reply is not None:
            return ToolResult(f"{expected} to {result.msg_id}:\n{render.frame(result.reply)}", result.to_wire())
        return ToolResult(
            f"Sent {result.kind} {result.msg_id} to {result.to}. Its {expected} will be "
            "held for you: call bridge_poll to collect it (or pass wait to block for it).",
            result.to_wire(),
        )

    async def answer_to(command: str, msg_id: str, content: str, key: str | None) -> ToolResult:
        request = SendRequest(command=command, sender=link.gid, msg_id=msg_id, contents=[content], key=key)
        result = await link.send(request)
        return ToolResult(f"Sent {result.kind} {result.msg_id} to {result.to} (re {msg_id}).", result.to_wire())

    async def bridge_send(args: dict[str, Any]) -> ToolResult:
        return await send("send", args["target"], args["content"], args.get("wait"), args.get("key"))

    async def bridge_ask(args: dict[str, Any]) -> ToolResult:
        return await send("ask", args["target"], args["question"], args.get("wait"), args.get("key"))

    async def bridge_reply(args: dict[str, Any]) -> ToolResult:
        return await answer_to("reply", args["msg_id"], args["content"], args.get("key"))

    async def bridge_answer(args: dict[str, Any]) -> ToolResult:
        return await answer_to("answer", args["msg_id"], args["content"], args.get("key"))

    async def bridge_poll(args: dict[str, Any]) -> ToolResult:
        wait = float(args.get("wait") or 0)
        limit = int(args.get("limit") or 100)
        deadline = time.monotonic() + wait
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            # peek, then ack once the result is built: a server that dies in between loses nothing
            request = PollRequest(gid=link.gid, wait=remaining, limit=limit, peek=True, peer=args.get("peer") or None)
            result = PollResult.from_wire(await link.call(request.OP, timeout=remaining + 30, **request.to_wire()))
            drained = result.messages
            if drained:
                await link.call("ack", gid=link.gid, msg_ids=[m.msg_id for m in drained], timeout=30)
            messages = [m for m in drained if not is_nudge(m.to_wire(), link.gid)]
            # only our own reminder timers came back: keep waiting for a real message
            if messages or not drained or remaining <= 0:
                break
        data = {"gid": link.gid, "messages": [m.to_wire() for m in messages]}
        if not messages:
            return ToolResult("No messages are held for you.", data)
        head = f"{len(messages)} message{'s' if len(messages) != 1 else ''} (now removed from your hold):"
        if len(drained) >= limit:
            head += " — more may be held: call bridge_poll again"
        return ToolResult(f"{head}\n\n{render.frames(messages)}", data)

    async def bridge_track(args: dict[str, Any]) -> ToolResult:
        within = float(args.get("timeout") or 60)
        request = TrackRequest(msg_id=args["msg_id"], wait=args.get("wait") or None, within=within)
        result = TrackResult.from_wire(await link.call(request.OP, timeout=within + 30, **request.to_wire()))
        result.check(request.wait, within)  # dead-lettered or not reached in time: a tool error with the reason
        lines = [f"{result.msg_id} to {result.recipient}:"]
        for state, info in result.states.items():
            how = info.get("reason") or info.get("how") or ""
            lines.append(f"- {state} at {time.strftime('%H:%M:%S', time.localtime(info.get('at') or 0))} {how}")
        return ToolResult("\n".join(lines), result.to_wire())

    async def bridge_roster(args: dict[str, Any]) -> ToolResult:
        request = RosterRequest()
        result = RosterResult.from_wire(await link.call(request.OP, timeout=30, **request.to_wire()))
        if not result.entries:
            return ToolResult("The roster is empty (no gateway announces any entity yet).", result.to_wire())
        lines = ["label | host | role | status | backend | gid"]
        for e in result.entries:
            row = (e.label, e.host, e.role, e.status, e.backend, e.gid)
            lines.append(" | ".join(str(v if v is not None else "-") for v in row))
        return ToolResult("\n".join(lines), result.to_wire())

    async def bridge_spawn(args: dict[str, Any]) -> ToolResult:
        wait_ready = float(args["wait_ready"]) if args.get("wait_ready") else None
        request = SpawnRequest(
            profile=args["profile"],
            host=args["host"],
            label=args.get("label") or None,
            wait_ready=wait_ready,
            prompt=args.get("prompt") or None,
            sender=link.gid,
        )
        # without wait_ready the target applies its profile's ready_timeout, which only the
        # gateway learns (its own wait is bounded by it): no socket timeout of ours then
        timeout = wait_ready + 60 if wait_ready else None
        result = SpawnResult.from_wire(await link.call(request.OP, timeout=timeout, **request.to_wire()))
        return ToolResult(
            f"Spawned {result.label or '?'} on {result.host} (gid {result.gid}). Address it with bridge_send.",
            result.to_wire(),
        )

    async def bridge_stop(args: dict[str, Any]) -> ToolResult:
        request = StopRequest(target=args["target"], sender=link.gid)
        result = StopResult.from_wire(await link.call(request.OP, timeout=60, **request.to_wire()))
        return ToolResult(f"Stopped {args['target']}.\n{as_json(result.to_wire())}", result.to_wire())

    return [
        Tool(
            "bridge_send",
            "Send a message to another agent or session (SEND), on this host or any other. With wait, block "
            "until its REPLY arrives and return it; without wait (or if wait runs out) the reply is held for "
            "you and bridge_poll collects it later. Returns the message id.",
            object_schema({"target": _TARGET, "content": _CONTENT, "wait": _WAIT, "key": _KEY}, ["target", "content"]),
            bridge_send,
            title="Send a message",
        ),
        Tool(
            "bridge_ask",
            "Ask another agent a question (ASK) and, with wait, block for its ANSWER. Use for a question that "
            "the other side should answer with bridge_answer; for plain tasking use bridge_send.",
            object_schema(
                {
                    "target": _TARGET,
                    "question": {"type": "string", "description": "The question."},
                    "wait": _WAIT,
                    "key": _KEY,
                },
                ["target", "question"],
            ),
            bridge_ask,
            title="Ask a question",
        ),
        Tool(
            "bridge_reply",
            "Reply (REPLY) to a message you received, by its msgId; the reply goes to whoever sent it, on "
            "whatever host. Use for SEND messages.",
            object_schema({"msg_id": _MSG_ID, "content": _CONTENT, "key": _KEY}, ["msg_id", "content"]),
            bridge_reply,
            title="Reply to a message",
        ),
        Tool(
            "bridge_answer",
            "Answer (ANSWER) an ASK you received, by its msgId, so the asker's blocked ask resumes.",
            object_schema({"msg_id": _MSG_ID, "content": _CONTENT, "key": _KEY}, ["msg_id", "content"]),
            bridge_answer,
            title="Answer a question",
        ),
        Tool(
            "bridge_poll",
            "Collect the messages held for you — new SENDs and ASKs, and replies that arrived after a send's "
            "wait ran out. Each message is returned once and then removed from your hold. With wait, block up "
            "to that many seconds if nothing is held yet.",
            object_schema(
                {
                    "wait": {**_WAIT, "description": "Seconds to wait if nothing is held yet (default 0)."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 1000,
                        "description": "Most messages to return (default 100).",
                    },
                    "peer": {
                        **_TARGET,
                        "description": "Only the messages from this sender (a label or gid); "
                        "the others stay held for a later call.",
                    },
                },
                [],
            ),
            bridge_poll,
            title="Collect held messages",
        ),
        Tool(
            "bridge_track",
            "What became of a message you sent, by its msgId: sent, delivered (typed into a pane, held, run, "
            "or accepted by a client), read (pulled by a poll, seen by the agent's hook, or a turn began with "
            "it), or dead-lettered with the reason. With wait, block until it is delivered or read; a "
            "dead-lettered message or one not there in time is an error that says so.",
            object_schema(
                {
                    "msg_id": {**_MSG_ID, "minLength": 8, "description": "The msgId a send returned."},
                    "wait": {
                        "type": "string",
                        "enum": ["delivered", "read"],
                        "description": "Block until the message reaches this state (absent: return at once).",
                    },
                    "timeout": {
                        **_WAIT,
                        "description": "Seconds wait may block (default 60).",
                    },
                },
                ["msg_id"],
            ),
            bridge_track,
            title="Track a sent message",
            read_only=True,
        ),
        Tool(
            "bridge_roster",
            "List every agent and session all gateways announce: label, host, role, status, delivery and gid. "
            "Use it to find who to message.",
            object_schema({}, []),
            bridge_roster,
            title="Who is where",
            read_only=True,
        ),
        Tool(
            "bridge_spawn",
            "Start a new agent from a configured profile on a host (this one or another), through that host's "
            "gateway. With wait_ready, block until the new agent can take messages. Returns its gid and label.",
            object_schema(
                {
                    "profile": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Spawn profile name ([profiles.NAME] in bridge.toml on that host).",
                    },
                    "host": {"type": "string", "minLength": 1, "description": "Host id to start it on."},
                    "label": {"type": "string", "description": "Label for the new agent (default: from the profile)."},
                    "wait_ready": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": MAX_WAIT,
                        "description": "Seconds to wait until the agent is ready (default: do not wait).",
                    },
                    "prompt": {
                        "type": "string",
                        "maxLength": MAX_PROMPT_BYTES,
                        "description": "First prompt for the new agent (default: the profile's own). "
                        "The profile needs an agent kind or prompt_args.",
                    },
                },
                ["profile", "host"],
            ),
            bridge_spawn,
            title="Spawn an agent",
        ),
        Tool(
            "bridge_stop",
            "Stop an agent that a launcher started (by label or gid), through its host's gateway.",
            object_schema({"target": _TARGET}, ["target"]),
            bridge_stop,
            title="Stop an agent",
        ),
    ]
