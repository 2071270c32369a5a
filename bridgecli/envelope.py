"""The message model: a versioned JSON body plus matching AMQP properties.

No broker imports here: the envelope is pure data so that it can be validated in the CLI's
fast path, in the gateway, and in tests without pika. ``docs/protocol.md`` is the prose
version of this module; keep them in step.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from bridgecli import wirejson

VERSION = 1
KINDS = ("SEND", "REPLY", "ASK", "ANSWER")
#: kinds that answer an earlier message and so must carry ``inReplyTo``
ANSWER_KINDS = ("REPLY", "ANSWER")
APP_ID = "bridgecli"
CONTENT_TYPE = "application/json"
#: hard ceiling for a body on the wire, whatever the configured content limit (hostile input)
MAX_BODY_BYTES = 4 * 1024 * 1024

_WIRE_NAMES = {
    "msg_id": "msgId",
    "kind": "kind",
    "sender": "from",
    "recipient": "to",
    "in_reply_to": "inReplyTo",
    "turn": "turn",
    "ts": "ts",
    "content": "content",
    "sender_label": "fromLabel",
    "sender_host": "fromHost",
    "channel": "channel",
    "copy_of": "copyOf",
}
_REQUIRED = ("v", "msgId", "kind", "from", "to", "ts", "content")
_REQUIRED_KEYS = frozenset(_REQUIRED)
#: one encoder for every body, as ``json.dumps(body, ensure_ascii=False, separators=(",", ":"))``
_ENCODE_BODY = wirejson.text_encoder((",", ":"))


class InvalidEnvelope(ValueError):
    """A body that is not a valid envelope. ``reason`` is a short machine word used in the
    ``x-bridge-reason`` dead-letter header; ``str()`` explains it."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def new_id() -> str:
    """A fresh message or entity id (UUID4, canonical text form)."""
    return str(uuid.uuid4())


#: either case (what a sender may write), matched without lowering the text first
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def is_uuid(text: str) -> bool:
    """True when ``text`` is a canonical UUID (what gids and msgIds look like). A regex, not
    ``uuid.UUID()``: this runs three times per received message on the gateway's hot path."""
    return isinstance(text, str) and _UUID_RE.fullmatch(text) is not None


@dataclass(frozen=True)
class Envelope:
    """One message between entities (docs/protocol.md, "The envelope").

    ``sender``/``recipient`` are global ids; ``sender_label``/``sender_host`` are display
    metadata only, never used for routing.
    """

    kind: str
    sender: str
    recipient: str
    content: str
    msg_id: str = field(default_factory=new_id)
    in_reply_to: str | None = None
    turn: str | None = None
    ts: float = field(default_factory=time.time)
    sender_label: str | None = None
    sender_host: str | None = None
    #: the channel (name, without ``#``) a channel message was sent to; ``recipient`` is then
    #: :func:`bridgecli.channels.channel_gid` of it
    channel: str | None = None
    #: set by the receiving gateway on one member's copy of a channel message: the id the
    #: sender gave it (``msg_id`` is then the copy's own, :func:`bridgecli.channels.copy_id`)
    copy_of: str | None = None
    #: authenticated AMQP user (``user_id`` property), filled in on receipt; not in the body
    user_id: str | None = None
    #: the body exactly as received (validated), so storing it needs no re-encoding
    raw: str | None = field(default=None, compare=False, repr=False)

    def to_wire(self) -> dict[str, Any]:
        """The JSON body as a dict (absent optionals omitted)."""
        body: dict[str, Any] = {"v": VERSION}
        for attr, wire in _WIRE_NAMES.items():
            value = getattr(self, attr)
            if value is not None:
                body[wire] = value
        return body

    def to_bytes(self) -> bytes:
        return _ENCODE_BODY(self.to_wire()).encode("utf-8")

    def amqp_properties(self) -> dict[str, Any]:
        """Keyword arguments for ``pika.BasicProperties`` matching this body."""
        return {
            "message_id": self.msg_id,
            "correlation_id": self.in_reply_to or self.msg_id,
            "type": self.kind,
            "delivery_mode": 2,
            "timestamp": int(self.ts),
            "app_id": APP_ID,
            "content_type": CONTENT_TYPE,
            "content_encoding": "utf-8",
        }

    def as_dict(self) -> dict[str, Any]:
        """Python-side dict (snake_case), e.g. for ``--json`` output."""
        data = asdict(self)
        data.pop("raw", None)
        return data


def check_content_size(content: str, limit: int) -> None:
    """Raise InvalidEnvelope('oversize') when ``content`` is bigger than ``limit`` bytes."""
    size = len(content.encode("utf-8"))
    if size > limit:
        raise InvalidEnvelope("oversize", f"content is {size} bytes, the limit is {limit}")


def parse(
    body: bytes, *, max_content_bytes: int | None = None, keep_raw: bool = False, user_id: str | None = None
) -> Envelope:
    """Decode and validate a body received from the broker; ``user_id`` is the authenticated
    AMQP user it came with (a property, not part of the body).

    Raises :class:`InvalidEnvelope` with one of the reasons ``oversize``, ``invalid_utf8``,
    ``bad_json``, ``not_an_object``, ``unknown_version``, ``missing_field``, ``bad_field``.
    """
    if len(body) > MAX_BODY_BYTES:
        raise InvalidEnvelope("oversize", f"body is {len(body)} bytes, the ceiling is {MAX_BODY_BYTES}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEnvelope("invalid_utf8", f"byte {exc.start} is not UTF-8") from None
    try:
        data = wirejson.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidEnvelope("bad_json", str(exc)[:200]) from None
    return from_wire(data, max_content_bytes=max_content_bytes, user_id=user_id, raw=text if keep_raw else None)


def from_wire(
    data: Any, *, max_content_bytes: int | None = None, user_id: str | None = None, raw: str | None = None
) -> Envelope:
    """Validate an already-decoded body (see :func:`parse`); ``user_id`` and ``raw`` are
    stored as given. One pass over the fields: this runs for every received message."""
    if not isinstance(data, dict):
        raise InvalidEnvelope("not_an_object", f"body is a JSON {type(data).__name__}, not an object")
    if data.get("v") != VERSION:
        raise InvalidEnvelope("unknown_version", f"version {data.get('v')!r}, this gateway speaks {VERSION}")
    if not _REQUIRED_KEYS <= data.keys():
        raise InvalidEnvelope("missing_field", "missing " + ", ".join(key for key in _REQUIRED if key not in data))
    msg_id = _uuid_field(data, "msgId")
    sender = _uuid_field(data, "from")
    recipient = _uuid_field(data, "to")
    content = data["content"]
    if not isinstance(content, str):
        raise InvalidEnvelope("bad_field", "content must be a str")
    kind = data["kind"]
    if kind not in KINDS:
        raise InvalidEnvelope("bad_field", f"kind {kind!r} is not one of {', '.join(KINDS)}")
    if not _finite_timestamp(data["ts"]):
        raise InvalidEnvelope("bad_field", "ts must be a finite number (seconds since the epoch)")
    in_reply_to = data.get("inReplyTo")
    if in_reply_to is not None:
        _uuid_field(data, "inReplyTo")  # validated, kept as sent
    turn, label, host = _short_field(data, "turn"), _short_field(data, "fromLabel"), _short_field(data, "fromHost")
    if kind in ANSWER_KINDS and not in_reply_to:
        raise InvalidEnvelope("missing_field", f"a {kind} needs inReplyTo")
    channel = copy_of = None
    if "channel" in data or "copyOf" in data:
        channel, copy_of = _channel_fields(data, recipient)
    if max_content_bytes is not None:
        check_content_size(content, max_content_bytes)
    envelope = object.__new__(Envelope)  # validated above: skip the frozen dataclass's __init__
    object.__setattr__(
        envelope,
        "__dict__",
        {
            "kind": kind,
            "sender": sender,
            "recipient": recipient,
            "content": content,
            "msg_id": msg_id,
            "in_reply_to": in_reply_to or None,
            "turn": turn,
            "ts": float(data["ts"]),
            "sender_label": label,
            "sender_host": host,
            "channel": channel,
            "copy_of": copy_of,
            "user_id": user_id,
            "raw": raw,
        },
    )
    return envelope


def _channel_fields(data: Mapping[str, Any], recipient: str) -> tuple[str, str | None]:
    """``channel`` and ``copyOf`` checked: a channel name whose pseudo-gid is ``to`` (on a
    member's stored copy, ``to`` is the member), and a copy's original id only beside a
    channel. The receiving gateway refuses ``copyOf`` from the wire."""
    from bridgecli import channels

    channel = data.get("channel")
    if not isinstance(channel, str) or not channels.valid_name(channel):
        raise InvalidEnvelope("bad_field", "channel must be a channel name")
    copy_of = _uuid_field(data, "copyOf") if data.get("copyOf") is not None else None
    if copy_of is None and recipient != channels.channel_gid(channel):  # a copy's is its member
        raise InvalidEnvelope("bad_field", f"to is not the address of channel {channel}")
    return channel, copy_of


def _uuid_field(data: Mapping[str, Any], key: str) -> str:
    """``data[key]`` checked to be a UUID string, in lower case."""
    value = data[key]
    if not isinstance(value, str):
        raise InvalidEnvelope("bad_field", f"{key} must be a str")
    if not is_uuid(value):
        raise InvalidEnvelope("bad_field", f"{key} must be a UUID")
    return value.lower()


def _short_field(data: Mapping[str, Any], key: str) -> str | None:
    """An optional display field: None, or a string of at most 256 characters."""
    value = data.get(key)
    if value is not None:
        if not isinstance(value, str):
            raise InvalidEnvelope("bad_field", f"{key} must be a str")
        if len(value) > 256:
            raise InvalidEnvelope("bad_field", f"{key} is longer than 256 characters")
    return value


def _finite_timestamp(value: Any) -> bool:
    """True for a JSON number usable as a timestamp: not a bool, not NaN/Infinity (Python's
    json accepts those) and not an integer too large for a float."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value)) and 0 <= value < 1e11
    except OverflowError:
        return False
