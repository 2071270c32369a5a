"""Wire frames of the browser bridge: the single source of truth for the protocol.

Every frame is one JSON object in one WebSocket *text* message, with a ``type``. This module
builds and validates frames and holds every constant both sides need (version, actions, error
and close codes, limits), so broker, agent client, executors and ``docs/browser-protocol.md``
cannot drift apart. Pure: no sockets, threads or clock.

Validation is strict about what routing depends on (``id``, ``action``, ``group``,
``params``) and lenient about extra fields, so a newer peer can add fields; a hello with a
different major ``v`` is refused.
"""

from __future__ import annotations

import json
from typing import Any

from bridgecli.errors import BrowserError

#: Protocol version carried in ``hello.v``. Bumped only for incompatible changes.
PROTOCOL_VERSION = 1

# --- roles -----------------------------------------------------------------------------------
ROLE_AGENT = "agent"  #: a producer: issues commands (CLI, MCP server, plugin, guest adapter)
ROLE_EXTENSION = "extension"  #: an executor: drives tabs in one browser (default role)
ROLES = (ROLE_AGENT, ROLE_EXTENSION)

# --- actions ---------------------------------------------------------------------------------
#: Actions an executor carries out. Agents may also spell them with a ``browser_`` prefix
#: (the tool names of MCP/plugins); the broker strips it before forwarding.
EXECUTOR_ACTIONS = ("open", "navigate", "tabs", "click", "type", "text", "snapshot", "screenshot", "close")
#: Actions the broker answers itself; never forwarded to an executor.
BROKER_ACTIONS = ("targets", "release", "default")
#: The action that creates a group (routing by ``target`` / primary executor).
OPEN_ACTION = "open"
#: The action the broker sends each executor on connect to rebuild group ownership.
TABS_ACTION = "tabs"

# --- error codes (result.error.code and error.code) -----------------------------------------
E_BAD_FRAME = "bad_frame"  #: not JSON, not an object, or a field has the wrong type
E_UNKNOWN_ACTION = "unknown_action"  #: action not in EXECUTOR_ACTIONS / BROKER_ACTIONS
E_NOT_OWNER = "not_owner"  #: the group is owned by another live agent
E_UNKNOWN_GROUP = "unknown_group"  #: a non-open action on a group nobody has opened
E_NO_EXECUTOR = "no_executor"  #: no browser connected to open a new group in
E_EXECUTOR_GONE = "executor_gone"  #: the browser that runs the group disconnected
E_UNKNOWN_TARGET = "unknown_target"  #: ``target`` matches no connected browser
E_AMBIGUOUS_TARGET = "ambiguous_target"  #: ``target`` label matches several browsers
E_RE_ELECTING = "re_electing"  #: the broker host went away; a new one is being elected
E_TIMEOUT = "timeout"  #: no result in time (agent side)
E_ABORTED = "aborted"  #: the caller gave up (agent side)
E_EXECUTOR = "executor_error"  #: generic failure reported by an executor
E_BUSY = "busy"  #: too many connections / pending commands
E_NOT_CONNECTED = "not_connected"  #: no broker reachable (agent side)

# --- WebSocket close codes (4000-4999 are application codes) ---------------------------------
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001  #: the broker is shutting down
CLOSE_TOO_BIG = 1009  #: a frame exceeded the size limit (sent by the websockets library)
CLOSE_TRY_LATER = 1013  #: too many connections; retry with backoff
CLOSE_BAD_TOKEN = 4001  #: hello carried a missing or wrong token
CLOSE_BAD_HELLO = 4002  #: first frame was not a valid hello (or none within the deadline)
CLOSE_BAD_VERSION = 4003  #: hello.v is a protocol version this broker does not speak
CLOSE_REPLACED = 4004  #: another connection with the same executor id took over
CLOSE_PROTOCOL = 4005  #: repeated malformed frames after hello

#: HTTP status for a refused handshake (web-page Origin).
HTTP_FORBIDDEN = 403

# --- limits ------------------------------------------------------------------------------------
#: Largest frame accepted before the hello (keeps unauthenticated peers cheap).
MAX_HELLO_BYTES = 64 * 1024
#: Largest frame accepted after the hello (screenshots are base64 PNGs in results).
MAX_FRAME_BYTES = 16 * 1024 * 1024
#: Seconds of silence after which the broker sends a keepalive ``ping`` (an MV3 service worker
#: is killed 30 s after its last WebSocket message; protocol-level pings do not count).
KEEPALIVE_SECONDS = 15.0
#: Seconds a new connection has to send its hello.
HELLO_TIMEOUT = 5.0
#: Malformed frames tolerated (each answered with an error frame) before closing 4005.
MAX_BAD_FRAMES = 8


class FrameError(BrowserError):
    """A frame that cannot be accepted. ``code`` is one of the ``E_*`` codes above."""

    def __init__(self, code: str, message: str, frame_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.frame_id = frame_id


#: one encoder for every frame: ``json.dumps`` with non-default options builds a new
#: ``JSONEncoder`` per call, which costs more than encoding a small frame
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def encode(frame: dict[str, Any]) -> str:
    """Serialise a frame (compact JSON; non-ASCII kept as is)."""
    return _encode(frame)


def decode(raw: str | bytes) -> dict[str, Any]:
    """Parse one WebSocket message into a frame dict with a string ``type``.

    Raises :class:`FrameError` (``bad_frame``) for binary junk, bad JSON, a non-object or a
    missing ``type``.
    """
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FrameError(E_BAD_FRAME, "frame is not UTF-8 text") from None
    try:
        frame = json.loads(raw)
    except ValueError:
        raise FrameError(E_BAD_FRAME, "frame is not valid JSON") from None
    if not isinstance(frame, dict):
        raise FrameError(E_BAD_FRAME, "frame is not a JSON object")
    if not isinstance(frame.get("type"), str):
        raise FrameError(E_BAD_FRAME, "frame has no string 'type'", frame.get("id"))
    return frame


def _opt_str(frame: dict[str, Any], key: str, limit: int = 200) -> str | None:
    value = frame.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise FrameError(E_BAD_FRAME, f"'{key}' must be a string of at most {limit} characters", frame.get("id"))
    return value


def check_id(frame: dict[str, Any]) -> str | int:
    """A request id is a non-empty string (≤ 100 chars) or an integer."""
    value = frame.get("id")
    if (
        isinstance(value, bool)
        or not isinstance(value, (str, int))
        or value == ""
        or (isinstance(value, str) and len(value) > 100)
    ):
        raise FrameError(E_BAD_FRAME, "'id' must be a non-empty string or an integer")
    return value


def validate_hello(frame: dict[str, Any]) -> dict[str, Any]:
    """Check a hello frame and return it normalised (``role`` filled in).

    Does not check the token (that is the server's job, in constant time); only that one is
    present as a string.
    """
    if frame.get("type") != "hello":
        raise FrameError(E_BAD_FRAME, "the first frame must be a hello")
    version = frame.get("v", PROTOCOL_VERSION)
    if isinstance(version, bool) or not isinstance(version, int):
        raise FrameError(E_BAD_FRAME, "'v' must be an integer")
    role = frame.get("role") or ROLE_EXTENSION  # absent = extension (shipped builds)
    if role not in ROLES:
        raise FrameError(E_BAD_FRAME, f"'role' must be one of {', '.join(ROLES)}")
    token = frame.get("token")
    if not isinstance(token, str):
        raise FrameError(E_BAD_FRAME, "hello needs a string 'token'")
    hello = dict(frame, v=version, role=role)
    for key in ("label", "id", "browser"):
        hello[key] = _opt_str(frame, key)
    if not isinstance(frame.get("default", False), bool):
        raise FrameError(E_BAD_FRAME, "'default' must be true or false")
    return hello


def normalise_action(action: Any, frame_id: Any = None) -> str:
    """Strip the ``browser_`` tool prefix and check the action is known."""
    if not isinstance(action, str) or not action:
        raise FrameError(E_BAD_FRAME, "'action' must be a non-empty string", frame_id)
    if action.startswith("browser_"):
        action = action[len("browser_") :]
    if action not in EXECUTOR_ACTIONS and action not in BROKER_ACTIONS:
        raise FrameError(
            E_UNKNOWN_ACTION,
            f"unknown action {action!r}; known: " + ", ".join(EXECUTOR_ACTIONS + BROKER_ACTIONS),
            frame_id,
        )
    return action


def validate_command(frame: dict[str, Any]) -> dict[str, Any]:
    """Check an agent's command frame; return it with ``action`` normalised.

    ``group`` is required for every executor action except ``tabs`` (where omitting it is a
    broker-answered listing) and for ``release``; ``params`` defaults to ``{}``.
    """
    frame_id = check_id(frame)
    action = normalise_action(frame.get("action"), frame_id)
    group = _opt_str(frame, "group")
    if group == "":
        raise FrameError(E_BAD_FRAME, "'group' must not be empty", frame_id)
    params = frame.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise FrameError(E_BAD_FRAME, "'params' must be an object", frame_id)
    target = _opt_str(frame, "target")
    needs_group = action in EXECUTOR_ACTIONS and action != TABS_ACTION or action == "release"
    if needs_group and group is None:
        raise FrameError(E_BAD_FRAME, f"action {action!r} needs a 'group'", frame_id)
    return {"type": "command", "id": frame_id, "action": action, "group": group, "params": params, "target": target}


def validate_result(frame: dict[str, Any]) -> dict[str, Any]:
    """Check a result frame: ``ok`` true with ``data``, or false with ``error{code,message}``."""
    frame_id = check_id(frame)
    ok = frame.get("ok")
    if not isinstance(ok, bool):
        raise FrameError(E_BAD_FRAME, "result needs a boolean 'ok'", frame_id)
    if ok:
        return {"type": "result", "id": frame_id, "ok": True, "data": frame.get("data")}
    error = frame.get("error")
    if isinstance(error, str):  # tolerate the older "error": "text" shape
        error = {"code": E_EXECUTOR, "message": error}
    if not isinstance(error, dict):
        error = {}
    code = error.get("code") if isinstance(error.get("code"), str) else E_EXECUTOR
    message = error.get("message") if isinstance(error.get("message"), str) else "executor failed"
    return {"type": "result", "id": frame_id, "ok": False, "error": {"code": code, "message": message}}


# --- builders ----------------------------------------------------------------------------------


def hello(
    token: str, role: str, *, label: str | None = None, id: str | None = None, browser: str | None = None
) -> dict[str, Any]:
    """The first frame every connection sends."""
    frame: dict[str, Any] = {"v": PROTOCOL_VERSION, "type": "hello", "token": token, "role": role}
    for key, value in (("label", label), ("id", id), ("browser", browser)):
        if value is not None:
            frame[key] = value
    return frame


def ready(client_id: str, role: str) -> dict[str, Any]:
    """The broker's answer to an accepted hello."""
    return {"v": PROTOCOL_VERSION, "type": "ready", "clientId": client_id, "role": role}


def command(
    frame_id: str | int, action: str, group: str | None, params: dict[str, Any] | None = None, target: str | None = None
) -> dict[str, Any]:
    """A command (agent → broker, or broker → executor without ``target``)."""
    frame: dict[str, Any] = {
        "type": "command",
        "id": frame_id,
        "action": action,
        "group": group,
        "params": params or {},
    }
    if target is not None:
        frame["target"] = target
    return frame


def ok(frame_id: str | int | None, data: Any = None) -> dict[str, Any]:
    """A successful result."""
    return {"type": "result", "id": frame_id, "ok": True, "data": data}


def fail(frame_id: str | int | None, code: str, message: str) -> dict[str, Any]:
    """A failed result."""
    return {"type": "result", "id": frame_id, "ok": False, "error": {"code": code, "message": message}}


def error(code: str, message: str, frame_id: Any = None) -> dict[str, Any]:
    """A frame-level error (the frame could not be read as a command/result at all)."""
    return {"type": "error", "id": frame_id, "error": {"code": code, "message": message}}


def event(name: str, group: str | None = None, data: Any = None) -> dict[str, Any]:
    """An event (executor → broker → agent(s), or broker → agents)."""
    return {"type": "event", "event": name, "group": group, "data": data}


PING = {"type": "ping"}
PONG = {"type": "pong"}


class CommandError(BrowserError):
    """A command that came back with ``ok: false`` (or never could be sent).

    ``code`` is one of the ``E_*`` codes, so callers (and agents) can branch on it; the hint
    says what to do, because the reader is often a model that acts on the text literally.
    """

    HINTS = {
        E_RE_ELECTING: "retry in a moment",
        E_NOT_OWNER: "use another group name, or wait until the owning agent exits",
        E_NOT_CONNECTED: "start the broker with `bridge browser serve`",
        E_TIMEOUT: "the browser may be busy or hung; retry, or check it",
    }

    def __init__(self, code: str, message: str) -> None:
        hint = self.HINTS.get(code)
        if hint and hint in message:
            hint = None
        super().__init__(message, hint)
        self.code = code
