"""Composing messages: who sends, to whom, and what — shared by the CLI and the gateway.

The CLI's direct path and the gateway's local API both turn a request ("send this to
that label") into an :class:`~bridgecli.envelope.Envelope` here, so validation, identity
and error messages are the same whichever path carried the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bridgecli import channels, send_ids
from bridgecli import envelope as env_mod
from bridgecli.envelope import Envelope, InvalidEnvelope
from bridgecli.errors import ConfigError, NotFound, Rejected
from bridgecli.hoststate.entities import Registry
from bridgecli.hoststate.store import Store
from bridgecli.requests import SendRequest

#: ``(target, force) -> gid``: how a path resolves a TARGET (the gateway's roster or the direct one)
ResolveFn = Callable[[str, bool], str]


@dataclass(frozen=True)
class Address:
    """Where a send request goes: the recipient, and for a reply/answer what it answers and
    the entity of this host that message was delivered to (who answers, unless named)."""

    recipient: str
    in_reply_to: str | None
    turn: str | None
    delivered_to: str | None = None
    #: the channel a ``#NAME`` target names; ``recipient`` is then its pseudo-gid
    channel: str | None = None


@dataclass(frozen=True)
class Identity:
    """The sending entity: its gid and (when registered here) label."""

    gid: str
    label: str | None


def sender_identity(registry: Registry, given: str | None) -> Identity:
    """The named sender: a gid (registered here or not) or a label of this host. Without a
    name, :func:`bridgecli.sender.resolve` picks the default identity."""
    raw = given
    if not raw:
        raise ConfigError("no sender identity was given", "pass --from LABEL or export BRIDGE_GID=<gid>")
    if env_mod.is_uuid(raw.lower()):
        entity = registry.get(raw.lower())
        return Identity(raw.lower(), entity.label if entity else None)
    entity = registry.resolve(raw)
    return Identity(entity.gid, entity.label)


def compose(
    kind: str,
    sender: Identity,
    recipient: str,
    content: str,
    *,
    host: str,
    max_content_bytes: int,
    in_reply_to: str | None = None,
    turn: str | None = None,
    msg_id: str | None = None,
    channel: str | None = None,
) -> Envelope:
    """Build an outgoing envelope; a content over this host's limit is a clear error. The
    host's limit is checked here, where its configuration is; ``msg_id`` and ``turn`` come
    from a :class:`~bridgecli.requests.SendRequest`, which checked them when it was built."""
    try:
        env_mod.check_content_size(content, max_content_bytes)
    except InvalidEnvelope as exc:
        raise Rejected(
            f"message too large: {exc.detail}", "send a shorter message or raise messaging.max_content_bytes"
        ) from None
    # every other field comes from validated sources (gids, kinds, labels), so the receiver's
    # full validation (envelope.from_wire) would accept it; not repeated on this hot path
    return Envelope(
        kind=kind,
        sender=sender.gid,
        recipient=recipient,
        content=content,
        in_reply_to=in_reply_to,
        turn=turn,
        sender_label=sender.label,
        sender_host=host,
        msg_id=msg_id.lower() if msg_id else env_mod.new_id(),
        channel=channel,
    )


def original_message(store: Store, msg_id: str) -> Envelope:
    """The received message ``msg_id`` refers to (for reply/answer/show); full id or prefix."""
    found = store.envelope(msg_id)
    if found is None and len(msg_id) >= 6:
        matches = store.find_prefix(msg_id)
        if len(matches) == 1:
            found = matches[0].envelope
    if found is None:
        raise NotFound(
            f"no message {msg_id!r} was received on this host",
            "check the id (`bridge poll`, `bridge show`); replies must be sent from the host that received the message",
        )
    return found


def address(request: SendRequest, store: Store, resolve: ResolveFn) -> Address:
    """The recipient of ``request``: its TARGET resolved, or the sender of the received message
    a reply/answer refers to (whose turn it keeps unless the request names one). That message's
    recipient is a local entity: the gateway stores only what an entity's own inbox held for it."""
    if request.command in ("reply", "answer"):
        original = original_message(store, request.msg_id or "")
        # a member's copy of a channel message answers the id its sender knows
        answers = original.copy_of or original.msg_id
        return Address(original.sender, answers, request.turn or original.turn, original.recipient)
    target = request.target or ""
    if channels.is_channel_target(target):
        name = channels.check_name(target)
        return Address(channels.channel_gid(name), None, request.turn, channel=name)
    return Address(resolve(target, request.force), None, request.turn)


def compose_request(
    request: SendRequest, sender: Identity, to: Address, *, host: str, max_content_bytes: int
) -> list[Envelope]:
    """The envelopes ``request`` sends (one, or one per line in bulk): the single place both the
    gateway and the direct path build them, so both validate alike. A ``key`` fixes their ids
    for ``sender`` (:func:`message_id`)."""
    return [
        compose(
            request.kind,
            sender,
            to.recipient,
            content,
            host=host,
            max_content_bytes=max_content_bytes,
            in_reply_to=to.in_reply_to,
            turn=to.turn,
            msg_id=message_id(request, sender, index),
            channel=to.channel,
        )
        for index, content in enumerate(request.contents)
    ]


def message_id(request: SendRequest, sender: Identity, index: int) -> str | None:
    """The id of message ``index`` of ``request``: its ``new_id``, else derived from the
    sender's gid and its ``key`` (numbered by line in bulk); None: mint a fresh one."""
    if request.new_id is not None:
        return request.new_id
    if request.key is not None:
        return send_ids.keyed_id(sender.gid, request.key, index if request.bulk else None)
    return None
