"""``bridge hook CLIENT EVENT``: what an agent client's hooks run, to report reads and activity.

``prompt`` (submitted: the frames it carries, by their ``[bridge xxxxxxxx]`` markers, were
read; the agent works), ``stop`` (idle) and ``notify`` (waiting for the user) become the
gateway's ``seen`` and ``activity`` operations. It runs inside the client's turn, so it never
fails or holds it: exit 0, nothing on stdout (Claude Code feeds a prompt hook's stdout to
the model), at most :data:`MAX_INPUT` bytes read and :data:`BUDGET` seconds spent
(``BRIDGE_HOOK_DEBUG`` explains on stderr). Goal: ≤ 60 ms over ``python -c pass``
(``bench/hook_runtime.py``): no click, ``re``, ``json``.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # typing imports re
if TYPE_CHECKING:
    from typing import Any

#: the most stdin bytes read; the rest is drained and discarded within the budget
MAX_INPUT = 1 << 20
#: the whole run's wall-time budget in seconds: reading stdin, connecting, both calls
BUDGET = 0.5
#: the most markers one ``seen`` call carries (the operation's own limit)
MAX_MARKERS = 64
MARKER_START = "[bridge "
HEX = frozenset("0123456789abcdef")

#: per client, the notification types that mean it waits for the user. Claude Code: its
#: ``notification_type`` (``idle_prompt`` comes a minute after ``Stop``: idle, not waiting);
#: Gemini CLI: ``ToolPermission``; Codex runs ``notify`` from ``PermissionRequest`` only.
WAITING: dict[str, frozenset[str]] = {
    "claude-code": frozenset({"permission_prompt", "elicitation_dialog", "worker_permission_prompt"}),
    "gemini": frozenset({"ToolPermission"}),
    "codex": frozenset(),
}
CLIENTS = tuple(WAITING)
#: the status each event reports (``notify`` only for a waiting notification)
STATUS = {"prompt": "working", "stop": "idle", "notify": "waiting"}
EVENTS = tuple(STATUS)


def markers(text: str, limit: int = MAX_MARKERS) -> list[str]:
    """The distinct 8-hex-digit ids of the markers ``[bridge xxxxxxxx]`` in ``text``, first
    seen first, at most ``limit``; a plain scan, not a regex (no ``re`` on this path)."""
    found: dict[str, None] = {}
    start = text.find(MARKER_START)
    while start >= 0 and len(found) < limit:
        tag = text[start + 8 : start + 17]
        if len(tag) == 9 and tag[8] == "]" and HEX.issuperset(tag[:8]):
            found[tag[:8]] = None
        start = text.find(MARKER_START, start + 1)
    return list(found)


def read_input(fd: int, deadline: float, limit: int = MAX_INPUT) -> bytes:
    """The first ``limit`` bytes of ``fd`` up to its end or ``deadline`` (a monotonic time),
    the rest read and dropped so the client's write never fails; ``b""`` from a terminal."""
    import select

    try:
        if os.isatty(fd):
            return b""
    except OSError:
        return b""
    kept: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        if size < limit:
            kept.append(chunk[: limit - size])
        size += len(chunk)
    return b"".join(kept)


def parse(data: bytes) -> dict[str, Any]:
    """The hook input's object, or ``{}`` for anything else (not UTF-8, not JSON, cut short)."""
    from bridgecli import wirejson

    try:
        value = wirejson.loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError included
        return {}
    return value if isinstance(value, dict) else {}


def calls(client: str, event: str, payload: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The gateway operations (name, params without identity) the event asks for."""
    how = {"how": f"hook:{client}"}
    if event == "prompt":
        prompt = payload.get("prompt")
        found = markers(prompt) if isinstance(prompt, str) else []
        seen = [("seen", {"markers": found, **how})] if found else []
        return [*seen, ("activity", {"status": "working", **how})]
    if event == "stop":
        return [("activity", {"status": "idle", **how})]
    if event == "notify" and _waiting(client, payload):
        return [("activity", {"status": "waiting", **how})]
    return []


def _waiting(client: str, payload: dict[str, Any]) -> bool:
    kind = payload.get("notification_type")
    if isinstance(kind, str):
        return kind in WAITING.get(client, frozenset())
    if payload.get("hook_event_name") == "PermissionRequest":
        return True
    # a client too old to send a type: Claude Code's permission message says so
    message = payload.get("message")
    return isinstance(message, str) and "permission" in message.lower()


def identity() -> dict[str, str | None]:
    """Who the hook speaks for: ``$BRIDGE_GID`` (panes bridge spawns), else ``$TMUX_PANE``."""
    gid = os.environ.get("BRIDGE_GID") or None
    return {"gid": gid, "pane": None if gid else os.environ.get("TMUX_PANE") or None}


def send(requests: list[tuple[str, dict[str, Any]]], deadline: float) -> None:
    """Make ``requests`` to the local gateway, each bounded by what is left of ``deadline``;
    a failed one is noted (debug) and the next still tried."""
    from bridgecli.gateway.client import GatewayClient
    from bridgecli.socketpath import from_environment

    path = from_environment()
    if path is None:
        from bridgecli import paths

        path = str(paths.gateway_socket())
    client = GatewayClient.connect(path, timeout=max(deadline - time.monotonic(), 0.001))
    if client is None:
        _debug(f"no gateway on {path}")
        return
    with client:
        for op, params in requests:
            left = deadline - time.monotonic()
            if left <= 0:
                _debug(f"out of time before {op}")
                return
            try:
                answer = client.call(op, timeout=left, **params)
            except Exception as exc:  # an old gateway, NotFound, a timeout: the hook goes on
                _debug(f"{op} failed: {exc}")
                continue
            _debug(f"{op} -> {answer}")


def run(argv: list[str], stdin_fd: int = 0) -> int:
    """``bridge hook CLIENT EVENT`` (``argv`` after ``hook``): always 0, never a stdout byte."""
    began = time.monotonic()
    deadline = began + BUDGET
    try:
        if len(argv) != 2 or argv[0] not in CLIENTS or argv[1] not in EVENTS:
            _debug(f"usage: bridge hook {{{','.join(CLIENTS)}}} {{{','.join(EVENTS)}}}, not {argv}")
            return 0
        client, event = argv
        payload = parse(read_input(stdin_fd, began + BUDGET / 2))
        requests = calls(client, event, payload)
        who = identity()
        if not requests or not (who["gid"] or who["pane"]):
            _debug(f"nothing to report ({len(requests)} calls, identity {who})")
            return 0
        send([(op, {**params, **who}) for op, params in requests], deadline)
    except BaseException as exc:  # the hook must never fail its client, not even on Ctrl-C
        _debug(f"failed: {exc!r}")
    _debug(f"done in {(time.monotonic() - began) * 1000:.1f} ms")
    return 0


def _debug(text: str) -> None:
    if os.environ.get("BRIDGE_HOOK_DEBUG"):
        try:
            sys.stderr.write(f"bridge hook: {text}\n")
            sys.stderr.flush()
        except Exception:  # a closed stderr must not fail the hook
            pass
