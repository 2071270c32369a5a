"""Channel rules as pure data: names, the routing key members bind, the channel's pseudo-gid
and the id of one member's copy.

A channel is a routing key on ``bridge.msg``: each member's inbox is bound under
``chan.<name>``, so one publish reaches every member and the broker makes the copies. Every
copy carries the same body, so the receiving gateway gives each member's copy an id of its
own (:func:`copy_id`), derived from the message and the member: a redelivered copy gets the
same id and is dropped as a repeat, while two members on one host each keep theirs.
"""

from __future__ import annotations

#: what a channel name is made of: lower-case letters, digits, '-' and '_', starting with a
#: letter or digit, at most :data:`MAX_NAME` characters (as host ids). No ``re``: the
#: click-free ``bridge send`` checks names too (docs/decisions/start-without-re.md)
FIRST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
REST = FIRST | frozenset("-_")
MAX_NAME = 63
#: the routing-key prefix of channel messages; gids are UUIDs, so no gid key can collide
KEY_PREFIX = "chan."
#: how a command line names a channel where it names a target: ``#reviewers``
MARK = "#"
#: namespace of channel pseudo-gids and copy ids (a fixed, random UUID)
_NAMESPACE = "6f0c1d52-8f4b-4f25-9a51-3f0b7a8e2c41"
#: the most channels one entity may be in (a heartbeat lists them)
MAX_PER_ENTITY = 64


def valid_name(text: object) -> bool:
    """True when ``text`` is a channel name (without ``#``)."""
    return isinstance(text, str) and 0 < len(text) <= MAX_NAME and text[0] in FIRST and all(c in REST for c in text)


def is_channel_target(target: str) -> bool:
    """True when a TARGET names a channel (``#name``)."""
    return isinstance(target, str) and target.startswith(MARK)


def check_name(name: str) -> str:
    """``name`` (a leading ``#`` dropped) when it is a valid channel name; else BadChannelName."""
    from bridgecli.errors import BadChannelName

    text = name[1:] if isinstance(name, str) and name.startswith(MARK) else name
    if not valid_name(text):
        shown = str(name)[:70]
        raise BadChannelName(
            f"{shown!r} is not a channel name",
            "use 1-63 lower-case letters, digits, '-' and '_', starting with a letter or digit",
        )
    return str(text)


def routing_key(name: str) -> str:
    """The key every member's inbox is bound under on ``bridge.msg``."""
    return KEY_PREFIX + name


def channel_gid(name: str) -> str:
    """The ``to`` of a channel message: a UUID only ``name`` maps to, so the envelope keeps
    one shape and a copy cannot claim to be for another channel."""
    import uuid

    return str(uuid.uuid5(uuid.UUID(_NAMESPACE), "channel:" + name))


def copy_id(msg_id: str, member: str) -> str:
    """The id of ``member``'s copy of channel message ``msg_id``."""
    import uuid

    return str(uuid.uuid5(uuid.UUID(_NAMESPACE), f"copy:{msg_id}:{member}"))
