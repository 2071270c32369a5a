"""``bridge send|ask|reply|answer`` through a running gateway, without click: the fast path.

Why it exists: these are the commands agents and scripts call in loops, and through a gateway
the work is one line of JSON over a Unix socket. Importing click (plus the ``typing``,
``inspect`` and ``pathlib`` it pulls in) costs more than the whole rest of the call, so
``bridge`` tries this module first (:mod:`bridgecli.entry`) and it imports only ``getopt``,
``json`` and ``socket``. ``bench/messaging.py`` (b) measures the result.

It *declines* (returns None) whenever it is not sure to behave exactly like the click command,
and click then handles the call with its own messages: ``-h``, any option it does not know, an
argument click would reject, no gateway on the socket (click then publishes directly), or a
socket location only platformdirs can work out. ``tests/test_fast_send.py`` holds the option
sets equal to the click commands' and checks, over generated command lines, that whatever this
parser accepts click parses to the same values.
"""

from __future__ import annotations

import json
import os
import sys

from bridgecli.durations import parse as parse_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from bridgecli.gateway.client import GatewayClient

#: per command: option -> (name in the values, takes a value); mirrors bridgecli.cli.send
_FROM, _WAIT, _JSON = {"--from": ("sender", True)}, {"--wait": ("wait", True), "-w": ("wait", True)}, \
    {"--json": ("as_json", False)}
_SEND_ONLY = {"--delay": ("delay", True), "--lines": ("lines", False), "--id": ("new_id", True)}
_TARGETED = {"--force": ("force", False), "--turn": ("turn", True)}
OPTIONS: dict[str, dict[str, tuple[str, bool]]] = {
    "send": {**_FROM, **_WAIT, **_SEND_ONLY, **_TARGETED, **_JSON},
    "ask": {**_FROM, **_WAIT, **_TARGETED, **_JSON},
    "reply": {**_FROM, **_WAIT, **_JSON},
    "answer": {**_FROM, **_JSON},
}
_DURATIONS = ("wait", "delay")
#: per command: the names of its two arguments (click's parameter names)
ARGUMENTS = {"send": ("target", "message"), "ask": ("target", "question"), "reply": ("msg_id", "message"),
             "answer": ("msg_id", "message")}


def parse(argv: list[str]) -> tuple[str, dict[str, Any]] | None:
    """``(command, values)`` for a command line this path can run, else None.

    getopt (GNU mode: options and arguments in any order, ``--opt=value``, ``-wVALUE``, ``--``)
    rather than argparse, whose help formatter imports shutil and locale even when no help is
    shown. getopt accepts unique prefixes of long options and click does not, so every dash-word
    must name an option exactly.
    """
    if not argv or argv[0] not in OPTIONS:
        return None
    command, args = argv[0], argv[1:]
    options = OPTIONS[command]
    for arg in args:
        if arg == "--":
            break
        # click rejects a dash-word that is not an option ("-5", "-x", "--fr"): leave those to it
        if arg.startswith("-") and arg != "-" and arg.split("=", 1)[0] not in options and arg[:2] not in options:
            return None
    import getopt

    shorts = "".join(opt[1] + (":" if takes else "") for opt, (_, takes) in options.items() if len(opt) == 2)
    longs = [opt[2:] + ("=" if takes else "") for opt, (_, takes) in options.items() if len(opt) > 2]
    try:
        pairs, positionals = getopt.gnu_getopt(args, shorts, longs)
    except getopt.GetoptError:
        return None
    if len(positionals) != 2:
        return None
    values: dict[str, Any] = {name: (None if takes else False) for name, takes in options.values()}
    first, second = ARGUMENTS[command]
    values[first], values[second] = positionals
    for opt, value in pairs:
        name, takes = options[opt]
        if name in _DURATIONS:
            try:
                value = parse_duration(value)
            except ValueError:
                return None  # click reports the bad duration
        values[name] = value if takes else True
    if values["sender"] is None:
        values["sender"] = os.environ.get("BRIDGE_GID") or None
    if values.get("lines") and (values["message"] != "-" or values["wait"] or values["new_id"]):
        return None  # click's usage errors
    return command, values


def gateway_socket() -> str | None:
    """Where the gateway listens, when the environment alone says so (as
    :func:`bridgecli.paths.gateway_socket` computes it); None when only platformdirs knows."""
    override = os.environ.get("BRIDGE_GATEWAY_SOCKET")
    if override:
        return override
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return os.path.join(xdg, "bridge", "gateway.sock")
    return None


def read_content(message: str) -> str:
    """MESSAGE, or stdin for ``-``."""
    return sys.stdin.read() if message == "-" else message


def call_gateway(client: GatewayClient, *, command: str, contents: list[str], sender: str | None,
                 target: str | None = None, msg_id: str | None = None, delay: float | None = None,
                 force: bool = False, turn: str | None = None, wait: float | None = None,
                 bulk: bool = False, new_id: str | None = None) -> dict[str, Any]:
    """One ``send`` request on the gateway socket (shared with the click commands)."""
    params: dict[str, Any] = {"command": command, "sender": sender, "target": target, "msg_id": msg_id,
                              "delay": delay, "force": force, "turn": turn}
    if new_id is not None:
        params["new_id"] = new_id
    if bulk:
        return client.call("send", contents=contents, timeout=None, **params)
    if wait:  # the reply stays recoverable until the caller confirms it (confirm_pending)
        return client.call("send", content=contents[0], wait=wait, timeout=None, confirm=True, **params)
    return client.call("send", content=contents[0], timeout=60, **params)


def result_lines(result: dict[str, Any], as_json: bool) -> tuple[list[str], list[str]]:
    """What a send-like command prints: (stdout lines, stderr lines)."""
    err = []
    if result.get("registered"):  # a first send from a plain shell: say who it went as
        from bridgecli.sender import registered_note

        err.append(registered_note(result["registered"], "send"))
    if as_json:
        shown = {k: v for k, v in result.items() if k != "pending"}
        return [json.dumps(shown, indent=2, ensure_ascii=False, default=str)], err
    if "reply" in result:
        reply = result["reply"]
        return [reply["content"]], [*err, f"reply {reply['msgId']} from {reply.get('fromLabel') or reply['from']}"]
    if "msgIds" in result:
        return list(result["msgIds"]), err
    return [result["msgId"]], err


def _execute(client: GatewayClient, command: str, values: dict[str, Any]) -> dict[str, Any]:
    common = {"command": command, "sender": values["sender"], "wait": values.get("wait"),
              "target": values.get("target"), "msg_id": values.get("msg_id"),
              "force": values.get("force", False), "turn": values.get("turn")}
    if values.get("lines"):
        contents = [line for line in sys.stdin.read().splitlines() if line.strip()]
        return call_gateway(client, contents=contents, delay=values["delay"], bulk=True, **common)
    text = values["question"] if command == "ask" else values["message"]
    return call_gateway(client, contents=[read_content(text)], delay=values.get("delay"),
                        new_id=values.get("new_id"), **common)


def run(argv: list[str]) -> int | None:
    """Run the command and return its exit code, or None to leave the call to click."""
    parsed = parse(argv)
    if parsed is None:
        return None
    path = gateway_socket()
    if path is None:
        return None
    from bridgecli.errors import BridgeError, ExitCode
    from bridgecli.gateway.client import GatewayClient

    client = GatewayClient.connect(path)
    if client is None:
        return None  # no gateway: click's path publishes directly to the broker
    command, values = parsed
    try:
        with client:
            result = _execute(client, command, values)
            out, err = result_lines(result, values["as_json"])
            for text in out:
                print(text)
            for text in err:
                print(text, file=sys.stderr)
            sys.stdout.flush()
            client.confirm_pending(result)  # printed: the reply may leave the hold now
    except BridgeError as exc:
        if os.environ.get("BRIDGE_DEBUG", "") not in ("", "0"):
            raise
        print(f"bridge: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("bridge: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return int(ExitCode.OK)
    except Exception as exc:
        if os.environ.get("BRIDGE_DEBUG", "") not in ("", "0"):
            raise
        print(f"bridge: internal error: {type(exc).__name__}: {exc} — this is a bug; "
              f"rerun with --traceback and report it", file=sys.stderr)
        return int(ExitCode.FAILURE)
    return int(ExitCode.OK)
