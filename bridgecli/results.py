"""One result type per one-shot operation: what a :class:`bridgecli.session.HostSession` returns.

The twin of :mod:`bridgecli.requests`. The gateway's local API answers each operation with a
JSON object (docs/protocol.md) and the direct path builds the same object; both sessions hand it
back as one of these typed, read-only views, so callers read attributes, not dict keys.
:meth:`~_Wire.to_wire` gives the object back as it came, fields this client does not model
included: that is what ``--json`` prints. Plain slotted classes, as the requests are:
``dataclasses`` would cost the fast path (docs/decisions/typed-results.md).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Self

#: the client's own bookkeeping in an answer (ids to confirm), never printed
PENDING = "pending"


class _Wire:
    """A frozen view of one wire object; subclasses read their attributes in :meth:`_read`."""

    __slots__ = ("_wire",)
    _wire: dict[str, Any]

    def __init__(self, wire: dict[str, Any]) -> None:
        object.__setattr__(self, "_wire", dict(wire))
        self._read(self._wire)

    def _read(self, wire: dict[str, Any]) -> None:
        """Set this view's attributes from ``wire`` (a missing required field: ``KeyError``)."""

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Self:
        """The view of ``wire``: a local-API answer (its ``ok`` may stay) or a part of one."""
        return cls(wire)

    def to_wire(self) -> dict[str, Any]:
        """The object as it came, with every field (a copy)."""
        return dict(self._wire)

    def shown(self) -> dict[str, Any]:
        """What ``--json`` prints: :meth:`to_wire` without ``pending``, which only this
        process acts on (it confirms those ids once they are shown)."""
        return {key: value for key, value in self._wire.items() if key != PENDING}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Wire) and type(other) is type(self) and self._wire == other._wire

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}.from_wire({self._wire!r})"


class Registered(_Wire):
    """The default identity (``USER@HOSTID``) a call registered just now, told on stderr."""

    __slots__ = ("gid", "label")
    gid: str
    label: str

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(gid=wire["gid"], label=wire["label"])


def _registered(wire: dict[str, Any]) -> Registered | None:
    found = wire.get("registered")
    return Registered(found) if found else None


def _pending(wire: dict[str, Any]) -> tuple[str, ...]:
    return tuple(wire.get(PENDING) or ())


class Message(_Wire):
    """A received message with its hold ``state`` (as :mod:`bridgecli.hoststate.wire` writes
    it). ``sender_label``/``sender_host`` are display only; ``user`` is the broker-verified one."""

    __slots__ = (
        "msg_id",
        "kind",
        "sender",
        "sender_label",
        "sender_host",
        "recipient",
        "in_reply_to",
        "turn",
        "ts",
        "content",
        "user",
        "state",
        "channel",
        "copy_of",
    )
    msg_id: str
    kind: str
    sender: str
    sender_label: str | None
    sender_host: str | None
    recipient: str
    in_reply_to: str | None
    turn: str | None
    ts: float
    content: str
    user: str | None
    state: str | None
    #: the channel it was sent to, and the id its sender gave it (this copy's is its own)
    channel: str | None
    copy_of: str | None

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(
            msg_id=wire["msgId"],
            kind=wire["kind"],
            sender=wire["from"],
            sender_label=wire.get("fromLabel"),
            sender_host=wire.get("fromHost"),
            recipient=wire.get("to"),
            in_reply_to=wire.get("inReplyTo"),
            turn=wire.get("turn"),
            ts=wire["ts"],
            content=wire["content"],
            user=wire.get("user"),
            state=wire.get("state"),
            channel=wire.get("channel"),
            copy_of=wire.get("copyOf"),
        )


class EntityRecord(_Wire):
    """An entity registered on a host, as the local API shows it."""

    __slots__ = ("gid", "label", "role", "deliver", "host", "created", "launcher")
    gid: str
    label: str
    role: str
    deliver: str
    host: str | None
    created: float | None
    launcher: str | None

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(
            gid=wire["gid"],
            label=wire["label"],
            role=wire.get("role"),
            deliver=wire.get("deliver"),
            host=wire.get("host"),
            created=wire.get("created"),
            launcher=wire.get("launcher"),
        )


class SendResult(_Wire):
    """What a send sent: ``msg_id`` (``msg_ids`` in bulk, then ``msg_id`` is None) to ``to``;
    with a wait, the ``reply``, and in ``pending`` its id when the caller confirms it."""

    __slots__ = ("msg_id", "msg_ids", "to", "kind", "reply", "pending", "registered")
    msg_id: str | None
    msg_ids: tuple[str, ...] | None
    to: str | None
    kind: str | None
    reply: Message | None
    pending: tuple[str, ...]
    registered: Registered | None

    def _read(self, wire: dict[str, Any]) -> None:
        ids, reply = wire.get("msgIds"), wire.get("reply")
        self._set(
            msg_id=wire["msgId"] if ids is None else wire.get("msgId"),
            msg_ids=None if ids is None else tuple(ids),
            to=wire.get("to"),
            kind=wire.get("kind"),
            reply=None if reply is None else Message(reply),
            pending=_pending(wire),
            registered=_registered(wire),
        )

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids of every message sent, in order (one, or the bulk's)."""
        if self.msg_ids is not None:
            return self.msg_ids
        return () if self.msg_id is None else (self.msg_id,)


class PollResult(_Wire):
    """The messages a poll took (or peeked at) for ``gid``; ``pending``: the ids to confirm."""

    __slots__ = ("gid", "messages", "peer", "pending", "registered")
    gid: str
    messages: tuple[Message, ...]
    peer: str | None
    pending: tuple[str, ...]
    registered: Registered | None

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(
            gid=wire.get("gid"),
            messages=tuple(Message(m) for m in wire.get("messages") or ()),
            peer=wire.get("peer"),
            pending=_pending(wire),
            registered=_registered(wire),
        )


class RegisterResult(_Wire):
    """The entity a register call created."""

    __slots__ = ("entity",)
    entity: EntityRecord

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(entity=EntityRecord(wire["entity"]))


class UnregisterResult(_Wire):
    """The entity removed, and how many messages left in its inbox went to ``bridge.dlq``."""

    __slots__ = ("entity", "dead_lettered")
    entity: EntityRecord
    dead_lettered: int

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(entity=EntityRecord(wire["entity"]), dead_lettered=wire.get("dead_lettered") or 0)


class ShowResult(_Wire):
    """One received message, in full."""

    __slots__ = ("message",)
    message: Message

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(message=Message(wire["message"]))


class SpawnResult(_Wire):
    """The entity a spawn started on ``host`` (the target gateway's control answer)."""

    __slots__ = ("gid", "host", "label", "role", "deliver", "launcher")
    gid: str
    host: str
    label: str | None
    role: str | None
    deliver: str | None
    launcher: str | None

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(**{name: wire.get(name) for name in self.__slots__})
        self._set(gid=wire["gid"], host=wire["host"])


class StopResult(_Wire):
    """The entity a stop ended on ``host``, and whether its process was stopped."""

    __slots__ = ("gid", "host", "label", "process_stopped")
    gid: str
    host: str
    label: str | None
    process_stopped: bool | None

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(**{name: wire.get(name) for name in self.__slots__})
        self._set(gid=wire["gid"], host=wire["host"])


class RosterRow(_Wire):
    """One entity as its gateway last announced it (:class:`bridgecli.roster.RosterEntry`)."""

    __slots__ = ("gid", "label", "host", "role", "status", "backend", "since", "version", "last_seen", "channels")
    gid: str
    label: str
    host: str
    role: str
    status: str
    backend: str | None
    since: float | None
    version: str | None
    last_seen: float
    #: the channels it is in (none from an older gateway)
    channels: tuple[str, ...]

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(**{name: wire.get(name) for name in self.__slots__})
        self._set(channels=tuple(wire.get("channels") or ()))


class GatewayRow(_Wire):
    """One live gateway (:class:`bridgecli.roster.GatewayEntry`): its host and spawn profiles."""

    __slots__ = ("host", "version", "last_seen", "interval", "entities", "profiles", "started")
    host: str
    version: str | None
    last_seen: float | None
    interval: float | None
    entities: int | None
    profiles: tuple[str, ...]
    started: float | None

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(**{name: wire.get(name) for name in self.__slots__})
        self._set(profiles=tuple(wire.get("profiles") or ()))


class RosterResult(_Wire):
    """The roster: its ``entries``, the live ``gateways``, their heartbeat ``interval`` (None:
    a gateway whose roster is not running yet), and ``hosts``: per host, how fresh the view is
    (``protocol``, ``age`` of its last frame, ``synced``, ``seq``, ``gaps``, ``full_at``;
    empty from an older gateway) as seen by ``local_host``, and ``relay``: how other hosts
    are heard (``feed``, ``relay``, ``epoch``, ``age``, ``refused``; None from an older gateway)."""

    __slots__ = ("entries", "gateways", "interval", "hosts", "local_host", "relay")
    entries: tuple[RosterRow, ...]
    gateways: tuple[GatewayRow, ...]
    interval: float | None
    hosts: tuple[dict[str, Any], ...]
    local_host: str | None
    relay: dict[str, Any] | None

    def _read(self, wire: dict[str, Any]) -> None:
        relay = wire.get("relay")
        self._set(
            relay=relay if isinstance(relay, dict) else None,
            entries=tuple(RosterRow(e) for e in wire.get("entries") or ()),
            gateways=tuple(GatewayRow(g) for g in wire.get("gateways") or ()),
            interval=wire.get("interval"),
            hosts=tuple(h for h in wire.get("hosts") or () if isinstance(h, dict)),
            local_host=wire.get("local_host"),
        )


class TrackResult(_Wire):
    """What became of one message sent from this host: ``states`` maps each state it reached
    (``sent``, ``delivered``, ``read``, ``dead-lettered``) to ``{at, how, ref}`` or
    ``{at, reason}``."""

    __slots__ = ("msg_id", "recipient", "states")
    msg_id: str
    recipient: str
    states: dict[str, dict[str, Any]]

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(msg_id=wire["msgId"], recipient=wire["to"], states=dict(wire.get("states") or {}))

    @property
    def dead(self) -> bool:
        """Dead-lettered, and not delivered since (a retry from the DLQ may deliver it)."""
        return "dead-lettered" in self.states and "delivered" not in self.states

    def check(self, wait: str | None, within: float) -> None:
        """Raise the error whose exit code says how a track ended, for the CLI and the MCP tool
        alike: :class:`~bridgecli.errors.DeadLettered`, or :class:`~bridgecli.errors.Timeout`
        when ``wait``'s state was not reached within ``within`` seconds."""
        from bridgecli.errors import DeadLettered, Timeout

        if self.dead:
            reason = self.states["dead-lettered"].get("reason") or "no reason given"
            raise DeadLettered(
                f"{self.msg_id} was dead-lettered: {reason}", "fix the cause, then `bridge dlq retry` on the hub"
            )
        if wait and wait not in self.states:
            raise Timeout(
                f"{self.msg_id} was not {wait} within {within:g}s",
                "track it again later: receipts keep coming after the timeout",
            )


class ArchivedMessage(Message):
    """A message of the archive: ``direction`` (``sent`` or ``received``) as local entity
    ``owner`` saw it; a sent one's receipt ``states`` (as :class:`TrackResult`'s) while the
    receipt ledger keeps them, else empty."""

    __slots__ = ("direction", "owner", "states")
    direction: str
    owner: str
    states: dict[str, dict[str, Any]]

    def _read(self, wire: dict[str, Any]) -> None:
        super()._read(wire)
        self._set(direction=wire["direction"], owner=wire["owner"], states=dict(wire.get("states") or {}))


class HistoryResult(_Wire):
    """Archived messages (op ``history``: newest first; op ``thread``: in time order)."""

    __slots__ = ("messages",)
    messages: tuple[ArchivedMessage, ...]

    def _read(self, wire: dict[str, Any]) -> None:
        self._set(messages=tuple(ArchivedMessage(m) for m in wire.get("messages") or ()))
