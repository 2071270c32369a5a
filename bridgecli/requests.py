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

from bridgecli import send_ids

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from bridgecli.errors import ConfigError

#: the commands that send a message, and the envelope kind each sends
KIND_FOR_COMMAND = {"send": "SEND", "ask": "ASK", "reply": "REPLY", "answer": "ANSWER"}
TARGETED = ("send", "ask")  #: sent to a TARGET; the others answer a received MSGID
MAX_TURN_CHARS = 256  #: the envelope's limit for ``turn`` (docs/protocol.md)
_HEX = frozenset("0123456789abcdef")


def _invalid(message: str, hint: str, usage: bool = False) -> ConfigError:
    """The error for a request no path may carry (``usage``: one its command line cannot
    make). :mod:`bridgecli.errors` is imported only here: its ``ExitCode`` enum would cost the
    click-free ``bridge send`` ~2 ms on every call."""
    from bridgecli.errors import ConfigError, UsageProblem

    return (UsageProblem if usage else ConfigError)(message, hint)


def _bulk_problem(bulk: bool, wait: Any, new_id: Any, message: str | None = "-") -> tuple[str, str] | None:
    """Why a bulk send (``send --lines``, each stdin line one message) cannot be made with
    these options, as ``(message, hint)``; None when it can. The one statement of that rule."""
    if not bulk:
        return None
    if message != "-":
        return "--lines reads stdin: pass '-' as MESSAGE", "pipe the lines in and pass '-'"
    if wait or new_id:
        return "--lines cannot be combined with --wait or --id", "send one message to use them"
    return None


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
    for; with ``confirm`` it then stays recoverable until the client confirms it. The ids:
    ``new_id``, else derived from the sender and ``key`` (:mod:`bridgecli.send_ids`), else
    fresh; ``fresh_id``: ``new_id`` was minted for this request and never sent before."""

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
        "key": None,
        "fresh_id": False,
    }
    __slots__ = tuple(FIELDS)
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
    key: str | None
    fresh_id: bool

    def __init__(self, **values: Any) -> None:
        values["contents"] = tuple(values.get("contents") or ())
        super().__init__(**values)

    def _validate(self) -> None:
        if self.command not in KIND_FOR_COMMAND:
            raise _invalid(f"unknown send command {self.command!r}", f"use one of {', '.join(KIND_FOR_COMMAND)}")
        if not self.bulk and len(self.contents) != 1:
            raise _invalid("a message needs exactly one content", "pass the text, or '-' to read stdin")
        problem = _bulk_problem(self.bulk, self.wait, self.new_id)
        if problem is not None:
            raise _invalid(*problem, usage=True)
        if self.wait is not None and self.wait < 0:
            raise _invalid("--wait cannot be negative", "pass a duration such as 30s")
        if self.new_id is not None and not send_ids.is_uuid(self.new_id.lower()):
            raise _invalid(f"bad message id {self.new_id!r}", "--id takes a UUID, e.g. from `uuidgen`")
        problem = send_ids.key_problem(self.key, self.new_id)
        if problem is not None:
            raise _invalid(*problem, usage=True)
        if self.turn is not None and len(self.turn) > MAX_TURN_CHARS:
            raise _invalid(f"--turn is longer than {MAX_TURN_CHARS} characters", "use a shorter turn id")
        if self.target is not None and self.target.startswith("#"):
            from bridgecli import channels

            channels.check_name(self.target)
            if self.wait is not None:
                raise _invalid(
                    "--wait cannot be used with a channel: every member may reply",
                    "send without --wait and read the replies with `bridge poll`",
                    usage=True,
                )

    @staticmethod
    def command_line_problem(values: dict[str, Any]) -> tuple[str, str] | None:
        """Why the command line ``values`` (the parameter names of
        :mod:`bridgecli.send_options`) makes no request, as ``(message, hint)``; else None.
        Needs no stdin, so the fast path can leave such a line to click, which reports it."""
        return _bulk_problem(
            bool(values.get("lines")), values.get("wait"), values.get("new_id"), values.get("message")
        ) or send_ids.key_problem(values.get("key"), values.get("new_id"))

    @classmethod
    def from_command_line(cls, command: str, values: dict[str, Any], read_stdin: Callable[[], str]) -> SendRequest:
        """The request ``bridge COMMAND`` makes from its parsed ``values`` (see
        :meth:`command_line_problem`, raised as :class:`~bridgecli.errors.UsageProblem`
        before stdin is read). ``read_stdin()`` gives MESSAGE ``-`` and the ``--lines``.
        A reply waited for is sent with ``confirm``: it stays recoverable until printed."""
        problem = cls.command_line_problem(values)
        if problem is not None:
            raise _invalid(*problem, usage=True)
        if values.get("lines"):
            contents = [line for line in read_stdin().splitlines() if line.strip()]
        else:
            text = values["question"] if command == "ask" else values["message"]
            contents = [read_stdin() if text == "-" else text]
        wait = values.get("wait")
        return cls(
            command=command,
            contents=contents,
            sender=values.get("sender"),
            target=values.get("target"),
            msg_id=values.get("msg_id"),
            delay=values.get("delay"),
            force=bool(values.get("force")),
            turn=values.get("turn"),
            wait=wait,
            new_id=values.get("new_id"),
            bulk=bool(values.get("lines")),
            confirm=bool(wait),
            key=values.get("key"),
        )

    @property
    def kind(self) -> str:
        """The envelope kind this request sends."""
        return KIND_FOR_COMMAND[self.command]

    @property
    def may_be_resent(self) -> bool:
        """Its id may have been sent before (``--id``, ``--key``, a retry): its reply may be
        held already, so a wait looks in the store first."""
        return (self.new_id is not None or self.key is not None) and not self.fresh_id

    def pinned(self) -> SendRequest:
        """This request with its ids fixed for every try: unless ``new_id`` or ``key`` fixes
        them, a minted ``new_id``, or for a bulk send a minted ``key``. ``fresh_id`` is set
        only where it matters, with ``wait``: a gateway before it knew only ``new_id``."""
        if self.new_id is not None or self.key is not None:
            return self
        if self.bulk:
            return self.but(key=send_ids.mint_key())
        return self.but(new_id=send_ids.mint_id(), fresh_id=bool(self.wait))

    def but(self, **changes: Any) -> SendRequest:
        """A copy with ``changes``."""
        return type(self)(**{**{name: getattr(self, name) for name in self.FIELDS}, **changes})

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
        if self.wait is not None and self.wait < 0:
            raise _invalid("--wait cannot be negative", "pass a duration such as 30s")


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
        if self.wait_ready is not None and self.wait_ready < 0:
            raise _invalid("--wait-ready cannot be negative", "pass a duration such as 30s")
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


class TrackRequest(_Request):
    """What became of ``msg_id`` (a full id, or a prefix of at least 8 characters), a message
    sent from this host; with ``wait`` (``delivered`` or ``read``) block up to ``within``
    seconds until it gets there or is dead-lettered."""

    __slots__ = ("msg_id", "wait", "within")
    OP = "track"
    FIELDS = {"msg_id": "", "wait": None, "within": 60.0}
    msg_id: str
    wait: str | None
    within: float

    def _validate(self) -> None:
        text = str(self.msg_id).lower()
        if len(text) < 8 or len(text) > 36 or any(c not in _HEX and c != "-" for c in text):
            raise _invalid(f"{str(self.msg_id)[:40]!r} is not a message id", "pass the msgId `bridge send` printed")
        object.__setattr__(self, "msg_id", text)
        if self.wait not in (None, "delivered", "read"):
            raise _invalid(f"cannot wait for {self.wait!r}", "wait for delivered or read", usage=True)
        if not isinstance(self.within, int | float) or not 0 <= self.within <= 24 * 3600:
            raise _invalid("--timeout must be between 0s and 24h", "pass a duration such as 30s", usage=True)


class ActivityRequest(_Request):
    """What an agent's hook reports: its entity (``gid``, else the tmux ``pane`` it runs in)
    began reading these frame ``markers`` (``seen``), or is now ``status`` (``working``,
    ``waiting``, ``idle``); ``how`` names the hook (``hook:claude-code``)."""

    __slots__ = ("gid", "pane", "markers", "status", "how")
    OP = "activity"
    FIELDS = {"gid": None, "pane": None, "markers": (), "status": None, "how": "hook"}
    gid: str | None
    pane: str | None
    markers: tuple[str, ...]
    status: str | None
    how: str

    def _validate(self) -> None:
        markers = self.markers
        if not isinstance(markers, list | tuple) or len(markers) > 64:
            raise _invalid("markers must be a list of at most 64", "send the markers of one prompt")
        if not all(isinstance(m, str) and len(m) == 8 and all(c in _HEX for c in m) for m in markers):
            raise _invalid("a marker is 8 lower-case hex digits", "send what follows `[bridge ` in a frame")
        object.__setattr__(self, "markers", tuple(markers))
        if self.status not in (None, "working", "waiting", "idle"):
            raise _invalid(f"status {str(self.status)[:20]!r} is not working, waiting or idle", "send one of those")
        if not isinstance(self.how, str) or not 0 < len(self.how) <= 40:
            raise _invalid("how must be a short name", "send e.g. hook:claude-code")
        for name in ("gid", "pane"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or len(value) > 64):
                raise _invalid(f"{name} must be a short string", "send the value of $BRIDGE_GID or $TMUX_PANE")


class ChannelRequest(_Request):
    """``member`` (a local gid or label; None: the caller's default identity, as for a send)
    joins channel ``name`` (``#`` optional)."""

    __slots__ = ("name", "member")
    OP = "channel_join"
    FIELDS = {"name": "", "member": None}
    name: str
    member: str | None

    def _validate(self) -> None:
        from bridgecli import channels

        object.__setattr__(self, "name", channels.check_name(self.name))
        if self.member is not None and (not isinstance(self.member, str) or not 0 < len(self.member) <= 64):
            raise _invalid("--as must be a gid or label", "pass the member's gid or label")


class LeaveRequest(ChannelRequest):
    """``member`` leaves channel ``name``; not being in it is an error of its own."""

    __slots__ = ()
    OP = "channel_leave"


class ChannelListRequest(_Request):
    """Every channel with its members on every host, or only channel ``name``'s."""

    __slots__ = ("name",)
    OP = "channel_list"
    FIELDS = {"name": None}
    name: str | None

    def _validate(self) -> None:
        if self.name is not None:
            from bridgecli import channels

            object.__setattr__(self, "name", channels.check_name(self.name))


class HistoryRequest(_Request):
    """Archived messages, newest first: of local entity ``as_gid`` (gid or label; None: every
    local entity), exchanged ``with_`` a peer (gid or label), on ``channel``, matching
    ``search`` (words; a trailing ``*`` is a prefix), from the last ``since`` seconds; at most
    ``limit``."""

    __slots__ = ("as_gid", "with_", "channel", "search", "since", "limit")
    OP = "history"
    FIELDS = {"as_gid": None, "with_": None, "channel": None, "search": None, "since": None, "limit": 100}
    as_gid: str | None
    with_: str | None
    channel: str | None
    search: str | None
    since: float | None
    limit: int

    def _validate(self) -> None:
        for name in ("as_gid", "with_"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 64):
                raise _invalid(f"{name.rstrip('_')} must be a gid or label", "pass a gid or a label")
        if self.channel is not None:
            from bridgecli import channels

            object.__setattr__(self, "channel", channels.check_name(self.channel))
        if self.search is not None and (not isinstance(self.search, str) or len(self.search) > 1000):
            raise _invalid("--search must be text of at most 1000 characters", "search for a few words")
        if self.since is not None and (not isinstance(self.since, int | float) or not self.since >= 0):
            raise _invalid("--since must be a duration of at least 0", "pass a duration such as 2h", usage=True)
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or not 1 <= self.limit <= 1000:
            raise _invalid("--limit must be between 1 and 1000", "pass a smaller --limit", usage=True)


class ThreadRequest(_Request):
    """The conversation archived message ``msg_id`` (a full id, or a prefix of at least 8
    characters) belongs to, in time order."""

    __slots__ = ("msg_id",)
    OP = "thread"
    FIELDS = {"msg_id": ""}
    msg_id: str

    def _validate(self) -> None:
        text = str(self.msg_id).lower()
        if len(text) < 8 or len(text) > 36 or any(c not in _HEX and c != "-" for c in text):
            raise _invalid(f"{str(self.msg_id)[:40]!r} is not a message id", "pass a msgId `bridge history` printed")
        object.__setattr__(self, "msg_id", text)
