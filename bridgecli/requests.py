"""One request model per one-shot operation, shared by every path that carries it.

The click commands, the click-free fast path (:mod:`bridgecli.fast_send`), the MCP tools and
the gateway's local API all build or read these, so a request is validated once and means
the same whichever way it travels: :meth:`to_wire` gives the local API's JSON fields and
:meth:`from_wire` rebuilds (and re-validates) the request on the gateway side.

Plain frozen classes rather than dataclasses: ``dataclasses`` imports ``inspect``, which
would cost the fast path more than the rest of its imports (see
``docs/decisions/request-models.md``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from bridgecli.errors import ConfigError

#: the commands that send a message, and the envelope kind each sends
KIND_FOR_COMMAND = {"send": "SEND", "ask": "ASK", "reply": "REPLY", "answer": "ANSWER"}
TARGETED = ("send", "ask")  #: sent to a TARGET; the others answer a received MSGID


def _invalid(message: str, hint: str) -> ConfigError:
    """The error for a request no path may carry. :mod:`bridgecli.errors` is imported only
    here: its ``ExitCode`` enum would cost the click-free ``bridge send`` ~2 ms on every call."""
    from bridgecli.errors import ConfigError

    return ConfigError(message, hint)


class _Request:
    """Frozen keyword-only value: ``FIELDS`` maps each field to its default."""

    __slots__ = ()
    OP = ""
    FIELDS: dict[str, Any] = {}

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(self.FIELDS)
        if unknown:
            raise TypeError(f"unexpected field(s) {', '.join(sorted(unknown))}")
        for name, default in self.FIELDS.items():
            object.__setattr__(self, name, values.get(name, default))
        self._validate()

    def _validate(self) -> None:
        """Raise a :class:`~bridgecli.errors.BridgeError` for a request no path may carry."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_wire() == other.to_wire()

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({fields})"

    def to_wire(self) -> dict[str, Any]:
        """The local API's request fields (without ``op``); defaults are left out."""
        return {name: getattr(self, name) for name, default in self.FIELDS.items() if getattr(self, name) != default}

    @classmethod
    def from_wire(cls, fields: dict[str, Any]) -> Any:
        """The request a local-API call carries; an unknown field is a ``TypeError``."""
        return cls(**fields)


class SendRequest(_Request):
    """send/ask to ``target``, reply/answer to the received ``msg_id``; ``contents`` holds one
    message, or several with ``bulk`` (``send --lines``). With ``wait`` the reply is waited
    for; with ``confirm`` it then stays recoverable until the client confirms it."""

    __slots__ = (
        "command",
        "contents",
        "sender",
        "target",
        "msg_id",
        "delay",
        "force",
        "turn",
        "wait",
        "new_id",
        "bulk",
        "confirm",
    )
    OP = "send"
    FIELDS = {
        "command": "send",
        "contents": (),
        "sender": None,
        "target": None,
        "msg_id": None,
        "delay": None,
        "force": False,
        "turn": None,
        "wait": None,
        "new_id": None,
        "bulk": False,
        "confirm": False,
    }
    command: str
    contents: tuple[str, ...]
    sender: str | None
    target: str | None
    msg_id: str | None
    delay: float | None
    force: bool
    turn: str | None
    wait: float | None
    new_id: str | None
    bulk: bool
    confirm: bool

    def __init__(self, **values: Any) -> None:
        values["contents"] = tuple(values.get("contents") or ())
        super().__init__(**values)

    def _validate(self) -> None:
        if self.command not in KIND_FOR_COMMAND:
            raise _invalid(f"unknown send command {self.command!r}", f"use one of {', '.join(KIND_FOR_COMMAND)}")
        if not self.bulk and len(self.contents) != 1:
            raise _invalid("a message needs exactly one content", "pass the text, or '-' to read stdin")
        if self.bulk and (self.wait or self.new_id):
            raise _invalid("--lines cannot be combined with --wait or --id", "send one message to use them")
        if self.wait is not None and self.wait < 0:
            raise _invalid("--wait cannot be negative", "pass a duration such as 30s")

    @property
    def kind(self) -> str:
        """The envelope kind this request sends."""
        return KIND_FOR_COMMAND[self.command]

    @property
    def delay_ms(self) -> int | None:
        return int(self.delay * 1000) if self.delay else None

    def to_wire(self) -> dict[str, Any]:
        wire = super().to_wire()
        wire.pop("contents", None)
        wire.pop("bulk", None)
        if self.bulk:
            wire["contents"] = list(self.contents)
        else:
            wire["content"] = self.contents[0]
        return wire

    @classmethod
    def from_wire(cls, fields: dict[str, Any]) -> SendRequest:
        fields = dict(fields)
        if "contents" in fields and fields["contents"] is not None:
            fields["bulk"] = True
        else:
            fields.pop("contents", None)
            fields["contents"] = [fields.pop("content", None) or ""]
        return cls(**fields)


class RegisterRequest(_Request):
    """Register an entity on this host (``gid``/``launcher``/``launch_data`` for launchers)."""

    __slots__ = ("label", "role", "deliver", "gid", "launcher", "launch_data")
    OP = "register"
    FIELDS = {"label": "", "role": "agent", "deliver": "", "gid": None, "launcher": None, "launch_data": None}
    label: str
    role: str
    deliver: str
    gid: str | None
    launcher: str | None
    launch_data: dict[str, Any] | None


class UnregisterRequest(_Request):
    """Remove the entity ``target`` (gid, prefix or label) from this host."""

    __slots__ = ("target",)
    OP = "unregister"
    FIELDS = {"target": ""}
    target: str


class PollRequest(_Request):
    """Take the messages held for ``gid`` (None: the default identity). ``peek`` leaves them
    held until an ``ack``; ``confirm`` takes them until the client confirms; ``peer`` keeps
    only that sender's."""

    __slots__ = ("gid", "wait", "limit", "peek", "confirm", "peer")
    OP = "poll"
    FIELDS = {"gid": None, "wait": 0.0, "limit": 100, "peek": False, "confirm": False, "peer": None}
    gid: str | None
    wait: float
    limit: int
    peek: bool
    confirm: bool
    peer: str | None

    def _validate(self) -> None:
        if int(self.limit) < 1:
            raise _invalid(f"limit {self.limit} is below 1", "ask for at least one message")


class ShowRequest(_Request):
    """One received message, by its id or a unique prefix."""

    __slots__ = ("msg_id",)
    OP = "show"
    FIELDS = {"msg_id": ""}
    msg_id: str


class SpawnRequest(_Request):
    """Start an entity from ``profile`` on ``host``; ``wait_ready`` bounds its readiness
    (None: the profile's own ``ready_timeout``); ``prompt`` is its first prompt (None: the
    profile's own); ``sender`` is the requester, logged there."""

    __slots__ = ("profile", "host", "label", "wait_ready", "prompt", "sender")
    OP = "spawn"
    FIELDS = {"profile": "", "host": "", "label": None, "wait_ready": None, "prompt": None, "sender": None}
    profile: str
    host: str
    label: str | None
    wait_ready: float | None
    prompt: str | None
    sender: str | None

    def _validate(self) -> None:
        # refused here already, so an oversized prompt never reaches the broker; the target
        # gateway checks it again (agent_kinds.check_prompt) since another host may send anything
        from bridgecli.agent_kinds import check_prompt

        check_prompt(self.prompt)


class StopRequest(_Request):
    """Stop the launcher-started entity ``target`` through its host's gateway."""

    __slots__ = ("target", "sender")
    OP = "stop"
    FIELDS = {"target": "", "sender": None}
    target: str
    sender: str | None


class RosterRequest(_Request):
    """The union roster, or only ``host``'s entries."""

    __slots__ = ("host",)
    OP = "roster"
    FIELDS = {"host": None}
    host: str | None
