"""A fake herdr server that answers exactly as herdr's socket API is documented.

herdr cannot be installed here, so the plugin is tested against this fake, which follows
README.md#herdr-api: socket protocol, methods and shapes, errors, pane environment,
bracketed paste, long waits.

Each pane also emulates its program, so tests see what a payload *did*: a **shell** is a line
editor honouring bracketed paste; it records non-comment lines in ``pane.commands`` (never
run), closes on ``exit``, and starts a fake agent for a command in
``FakeHerdr.agent_commands``; an **agent** records submissions in ``pane.prompts``, moves
``state_change_seq`` on each, and exits on Ctrl-C twice.
"""

from __future__ import annotations

import copy
import json
import queue
import re
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ALPHABET = "123456789ABCDEFGHJKMNPQRSTVWXYZ0"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
STATUSES = ("idle", "working", "blocked", "done", "unknown")
_KEYS = {
    "enter": "\r",
    "return": "\r",
    "esc": "\x1b",
    "escape": "\x1b",
    "tab": "\t",
    "space": " ",
    "backspace": "\x7f",
    "left": "\x1b[D",
    "right": "\x1b[C",
    "up": "\x1b[A",
    "down": "\x1b[B",
    "minus": "-",
    "comma": ",",
    "period": ".",
    "slash": "/",
    "backslash": "\\",
    "quote": "'",
    "semicolon": ";",
    "colon": ":",
    "percent": "%",
    "ampersand": "&",
    "backtick": "`",
    "plus": "+",
    **{f"f{n}": f"\x1b[{n}~" for n in range(1, 13)},
}
_MODS = {"ctrl", "control", "shift", "alt", "option", "meta", "cmd", "super"}


#: the documented methods this fake implements (README.md#herdr-methods), and their handlers;
#: ``events.subscribe`` is served by ``_subscribe`` before dispatch
METHODS = {
    name: "m_" + name.replace(".", "_")
    for name in (
        "ping",
        "pane.list",
        "pane.get",
        "agent.list",
        "agent.get",
        "pane.send_text",
        "pane.send_keys",
        "pane.send_input",
        "agent.prompt",
        "pane.split",
        "pane.read",
        "pane.wait_for_output",
        "agent.wait",
        "events.wait",
    )
}
#: README.md#herdr-no-proof: ``agent.prompt`` with ``wait`` answers ``agent_prompt_stalled`` when the agent's
#: state does not change within 5 s of the prompt
PROMPT_STALL_SECONDS = 5.0


class ApiError(Exception):
    def __init__(self, code: str, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.request_id = code, message, request_id


def invalid(message: str) -> ApiError:
    return ApiError("invalid_request", f"invalid request: {message}", request_id="")


def encode_key(name: str) -> str:
    """A herdr key name as bytes for a legacy-keyboard pane; ApiError(invalid_key) if unknown."""
    text = name
    if re.fullmatch(r"C-.", text):
        text = "ctrl+" + text[2:]
    parts = text.split("+") if len(text) > 1 else [text]
    *mods, base = parts
    mods = [m.lower() for m in mods]
    if any(m not in _MODS for m in mods):
        raise ApiError("invalid_key", f"unsupported key {name}")
    if len(base) == 1 and base.isprintable():
        char = base
    elif base.lower() in _KEYS:
        char = _KEYS[base.lower()]
    else:
        raise ApiError("invalid_key", f"unsupported key {name}")
    if ("ctrl" in mods or "control" in mods) and len(char) == 1 and char.isalpha():
        return chr(ord(char.lower()) - 96)
    if any(m in ("alt", "option", "meta") for m in mods):
        return "\x1b" + char
    return char


@dataclass
class FakePane:
    pane_id: str
    terminal_id: str
    workspace_id: str = "w1"
    tab_id: str = "w1:t1"
    focused: bool = False
    agent: str | None = None
    name: str | None = None
    agent_status: str = "unknown"
    state_change_seq: int = 0
    revision: int = 0
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    bracketed_paste: bool = True
    prompt: str = "$ "
    raw: bytearray = field(default_factory=bytearray)  # every byte "written to the PTY"
    screen: list[str] = field(default_factory=list)
    line: str = ""
    commands: list[str] = field(default_factory=list)  # shell lines that would have run
    prompts: list[str] = field(default_factory=list)  # what the agent received
    closed: bool = False
    _in_paste: bool = False
    _ctrl_c: int = 0

    def info(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "pane_id": self.pane_id,
            "terminal_id": self.terminal_id,
            "workspace_id": self.workspace_id,
            "tab_id": self.tab_id,
            "focused": self.focused,
        }
        if self.agent:
            data["agent"] = self.agent
        data["agent_status"] = self.agent_status
        if self.cwd:
            data["cwd"] = self.cwd
        data["revision"] = self.revision
        return data

    def agent_info(self) -> dict[str, Any]:
        """AgentInfo = PaneInfo's required keys (``focused`` included, README.md#herdr-methods) plus
        ``name`` when set and ``state_change_seq``."""
        data = self.info()
        if self.name:
            data["name"] = self.name
        data["state_change_seq"] = self.state_change_seq
        return data

    def text(self) -> str:
        return "\n".join([*self.screen, (self.prompt + self.line) if not self.agent else "> " + self.line])


class FakeHerdr:
    """The server. ``start()``/``stop()``; test helpers mutate state under ``lock``."""

    def __init__(self, path: Path, *, version: str = "0.8.2", protocol: int = 20) -> None:
        self.path = Path(path)
        self.version, self.protocol = version, protocol
        self.lock = threading.RLock()
        self.panes: dict[str, FakePane] = {}
        self.requests: list[dict[str, Any]] = []
        self.agent_commands: dict[str, str] = {"fake-agent": "claude"}
        self.agent_startup = 0.2
        self.bin_path = "/usr/local/bin/herdr"  # what HERDR_BIN_PATH says in split panes
        self.prompt_stall = PROMPT_STALL_SECONDS
        self._counter = 0
        self._subscribers: list[queue.Queue[tuple[str, FakePane]]] = []
        self._server: socketserver.ThreadingUnixStreamServer | None = None

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> FakeHerdr:
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                fake._serve(self.connection)

        socketserver.ThreadingUnixStreamServer.daemon_threads = True
        self._server = socketserver.ThreadingUnixStreamServer(str(self.path), Handler)
        self.path.chmod(0o600)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self.path.unlink(missing_ok=True)

    # --- state helpers for tests ---------------------------------------------------

    def _new_id(self) -> str:
        self._counter += 1
        n, digits = self._counter, ""
        while n:
            n, rem = divmod(n - 1, len(ALPHABET))
            digits = ALPHABET[rem] + digits
        return digits

    def _emit(self, kind: str, pane: FakePane) -> None:
        """Tell subscribers: ``created``, ``closed`` or ``status``."""
        snapshot = copy.copy(pane)  # the state at the time of the event, not at send time
        for subscriber in list(self._subscribers):
            subscriber.put((kind, snapshot))

    def add_pane(
        self,
        *,
        agent: str | None = None,
        status: str | None = None,
        name: str | None = None,
        bracketed_paste: bool = True,
        ready: bool = True,
    ) -> FakePane:
        with self.lock:
            suffix = self._new_id()
            pane = FakePane(
                pane_id=f"w1:p{suffix}",
                terminal_id=f"term_{suffix}",
                agent=agent,
                name=name,
                agent_status=status or ("idle" if agent else "unknown"),
                bracketed_paste=bracketed_paste and ready,
                prompt="$ " if ready else "",
            )
            self.panes[pane.pane_id] = pane
            self._emit("created", pane)
            return pane

    def set_status(self, pane_id: str, status: str) -> None:
        with self.lock:
            pane = self.panes[pane_id]
            pane.agent_status = status
            pane.state_change_seq += 1
            pane.revision += 1
            self._emit("status", pane)

    def close_pane(self, pane_id: str) -> None:
        with self.lock:
            pane = self.panes.pop(pane_id)
            pane.closed = True
            self._emit("closed", pane)

    def pane_bytes(self, pane_id: str) -> bytes:
        with self.lock:
            return bytes(self.panes[pane_id].raw)

    # --- the PTY emulation ---------------------------------------------------------

    def _write(self, pane: FakePane, data: str) -> None:
        pane.raw += data.encode("utf-8")
        pane.revision += 1
        i = 0
        while i < len(data):
            if data.startswith(PASTE_START, i):
                pane._in_paste, i = True, i + len(PASTE_START)
                continue
            if data.startswith(PASTE_END, i):
                pane._in_paste, i = False, i + len(PASTE_END)
                continue
            ch = data[i]
            i += 1
            if pane._in_paste:
                pane.line += "\n" if ch == "\r" else ch
            elif ch in "\r\n":
                self._submit(pane)
            elif ch == "\x03":
                self._interrupt(pane)
            elif ch == "\x1b":  # an escape sequence outside a paste: a key, not text
                match = re.match(r"\[[0-9;]*[A-Za-z~]|\].*?(\x07|\x1b\\)|.", data[i:], re.S)
                i += match.end() if match else 0
            elif ch == "\x7f":
                pane.line = pane.line[:-1]
            elif ch.isprintable() or ch == "\t":
                pane.line += ch
            if pane.closed:
                return

    def _submit(self, pane: FakePane) -> None:
        line, pane.line = pane.line, ""
        pane.screen.extend((pane.prompt + line if not pane.agent else "> " + line).split("\n"))
        if pane.agent:
            pane.prompts.append(line)
            pane.agent_status = "working"
            pane.state_change_seq += 1
            self._emit("status", pane)
            threading.Timer(0.05, lambda: self._settle(pane)).start()
            return
        for command in line.split("\n"):
            stripped = command.strip()
            if not stripped or stripped.startswith("#"):
                continue
            pane.commands.append(stripped)
            word = stripped.split()[0]
            if stripped == "exit":
                self.panes.pop(pane.pane_id, None)
                pane.closed = True
                self._emit("closed", pane)
                return
            kind = next((k for cmd, k in self.agent_commands.items() if cmd in stripped.split()), None)
            if kind:
                threading.Timer(self.agent_startup, self._start_agent, args=(pane, kind, stripped)).start()
                return
            pane.screen.append(f"sh: {word}: not found")

    def _settle(self, pane: FakePane) -> None:
        with self.lock:
            if pane.agent and pane.agent_status == "working":
                pane.agent_status = "idle"
                pane.state_change_seq += 1
                self._emit("status", pane)

    def _start_agent(self, pane: FakePane, kind: str, command: str) -> None:
        with self.lock:
            if pane.closed:
                return
            pane.agent, pane.agent_status = kind, "idle"
            pane.state_change_seq += 1
            self._emit("status", pane)
            env = " ".join(f"{k}={v}" for k, v in sorted(pane.env.items()) if k.startswith("BRIDGE_"))
            pane.screen.append(f"fake agent ready ({env})")

    def _interrupt(self, pane: FakePane) -> None:
        pane.line = ""
        if pane.agent:
            pane._ctrl_c += 1
            if pane._ctrl_c >= 2:
                pane.agent, pane.agent_status, pane._ctrl_c = None, "unknown", 0
                pane.state_change_seq += 1
                self._emit("status", pane)
        else:
            pane.screen.append("^C")

    # --- the socket protocol -------------------------------------------------------

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(5.0)  # the line must arrive within 5 s
        data = b""
        try:
            while b"\n" not in data and len(data) <= 1024 * 1024:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            return
        line = data.split(b"\n", 1)[0]
        try:
            if len(line) > 1024 * 1024:
                raise invalid("request line exceeds 1 MiB")
            request_id, method, params = self._parse(line)
            if method == "events.subscribe":
                self._subscribe(conn, request_id, params)
                return
            try:
                result = self._dispatch(method, params, conn)
                answer: dict[str, Any] = {"id": request_id, "result": result}
            except ApiError as exc:
                answer = {
                    "id": request_id if exc.request_id is None else exc.request_id,
                    "error": {"code": exc.code, "message": exc.message},
                }
        except ApiError as exc:
            answer = {"id": "", "error": {"code": exc.code, "message": exc.message}}
        try:
            conn.sendall(json.dumps(answer, separators=(",", ":")).encode("utf-8") + b"\n")
        except OSError:
            pass

    def _subscribe(self, conn: socket.socket, request_id: str, params: dict[str, Any]) -> None:
        """``events.subscribe``: ack, then one event per line until the client hangs up."""
        subs = params.get("subscriptions")
        if not isinstance(subs, list) or not all(isinstance(x, dict) for x in subs):
            raise invalid("missing field `subscriptions`")
        events: queue.Queue[tuple[str, FakePane]] = queue.Queue()
        initial = []
        with self.lock:
            for sub in subs:
                if sub.get("type") not in ("pane.created", "pane.closed", "pane.agent_status_changed"):
                    raise invalid(f"unknown subscription type `{sub.get('type')}`")
                if sub["type"].startswith("pane.agent"):
                    if "pane_id" not in sub:
                        raise invalid("missing field `pane_id`")
                    if sub["pane_id"] not in self.panes:
                        self._send(
                            conn,
                            {
                                "id": request_id,
                                "error": {"code": "pane_not_found", "message": f"pane {sub['pane_id']} not found"},
                            },
                        )
                        return
                    pane = self.panes[sub["pane_id"]]
                    if sub.get("agent_status") == pane.agent_status:  # a filter that already holds
                        initial.append(("status", pane))
            self._subscribers.append(events)
        try:
            self._send(conn, {"id": request_id, "result": {"type": "subscription_started"}})
            for item in initial:
                events.put(item)
            while True:
                try:
                    kind, pane = events.get(timeout=0.05)
                except queue.Empty:
                    conn.setblocking(False)
                    try:
                        if conn.recv(1, socket.MSG_PEEK) == b"":
                            return
                    except (BlockingIOError, InterruptedError):
                        pass
                    finally:
                        conn.setblocking(True)
                    continue
                for sub in subs:
                    event = self._event_for(sub, kind, pane)
                    if event is not None:
                        self._send(conn, event)
        except OSError:
            return
        finally:
            with self.lock:
                self._subscribers.remove(events)

    @staticmethod
    def _event_for(sub: dict[str, Any], kind: str, pane: FakePane) -> dict[str, Any] | None:
        """The two event shapes of herdr's API (README.md#herdr-methods): snake_case lifecycle events with a
        ``type`` in ``data``, dotted pane-scoped events without one."""
        if sub["type"] == "pane.created" and kind == "created":
            return {"event": "pane_created", "data": {"type": "pane_created", "pane": pane.info()}}
        if sub["type"] == "pane.closed" and kind == "closed":
            return {
                "event": "pane_closed",
                "data": {"type": "pane_closed", "pane_id": pane.pane_id, "workspace_id": pane.workspace_id},
            }
        if (
            sub["type"] == "pane.agent_status_changed"
            and kind == "status"
            and sub.get("pane_id") == pane.pane_id
            and sub.get("agent_status") in (None, pane.agent_status)
        ):
            data: dict[str, Any] = {
                "pane_id": pane.pane_id,
                "workspace_id": pane.workspace_id,
                "agent_status": pane.agent_status,
            }
            if pane.agent:
                data["agent"] = pane.agent
            return {"event": "pane.agent_status_changed", "data": data}
        return None

    @staticmethod
    def _send(conn: socket.socket, obj: dict[str, Any]) -> None:
        conn.sendall(json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\n")

    def _parse(self, line: bytes) -> tuple[str, str, dict[str, Any]]:
        try:
            request = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise invalid(str(exc)) from None
        if (
            not isinstance(request, dict)
            or not isinstance(request.get("id"), str)
            or not isinstance(request.get("method"), str)
        ):
            raise invalid("expected an object with string id and method")
        params = request.get("params", {})
        if not isinstance(params, dict):
            raise invalid("params must be an object")
        with self.lock:
            self.requests.append(request)
        return request["id"], request["method"], params

    def _dispatch(self, method: str, params: dict[str, Any], conn: socket.socket) -> dict[str, Any]:
        # only documented method names (README.md#herdr-methods); a misspelt name such as
        # "pane_get" or "pane.send.text" is an unknown method, as on the real server
        name = METHODS.get(method)
        if name is None:
            raise invalid(f"unknown method `{method}`")
        handler: Callable[..., dict[str, Any]] = getattr(self, name)
        if method in ("agent.wait", "events.wait", "pane.wait_for_output") or (
            method == "agent.prompt" and params.get("wait")
        ):
            return handler(params, conn)
        with self.lock:
            return handler(params)

    @staticmethod
    def _req(params: dict[str, Any], key: str, kind: type = str) -> Any:
        if key not in params:
            raise invalid(f"missing field `{key}`")
        if not isinstance(params[key], kind):
            raise invalid(f"invalid type for `{key}`")
        return params[key]

    def _pane(self, pane_id: str) -> FakePane:
        pane = self.panes.get(pane_id)
        if pane is None:
            raise ApiError("pane_not_found", f"pane {pane_id} not found")
        return pane

    def _agent(self, target: str) -> FakePane:
        matches = [p for p in self.panes.values() if p.agent and (p.name == target or p.pane_id == target)]
        if not matches:
            raise ApiError("agent_not_found", f"agent {target} not found")
        if len(matches) > 1:
            raise ApiError("agent_target_ambiguous", f"agent target {target} is ambiguous")
        return matches[0]

    def _hold(self, conn: socket.socket, timeout_ms: Any, check: Callable[[], Any], what: str) -> Any:
        """Poll ``check`` every 50 ms (herdr polls every 100 ms) until it returns a value;
        give up when the client hangs up or the timeout passes."""
        deadline = None if timeout_ms is None else time.monotonic() + float(timeout_ms) / 1000
        while True:
            with self.lock:
                value = check()
            if value is not None:
                return value
            if deadline is not None and time.monotonic() >= deadline:
                raise ApiError("timeout", f"timed out waiting for {what}")
            try:  # a client that hung up abandons the wait
                conn.setblocking(False)
                if conn.recv(1, socket.MSG_PEEK) == b"":
                    raise ApiError("client_gone", "client disconnected")
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                raise ApiError("client_gone", "client disconnected") from None
            finally:
                conn.setblocking(True)
            time.sleep(0.05)

    # --- methods -------------------------------------------------------------------

    def m_ping(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "pong",
            "version": self.version,
            "protocol": self.protocol,
            "capabilities": {"live_handoff": True, "detached_server_daemon": False},
        }

    def m_pane_list(self, params: dict[str, Any]) -> dict[str, Any]:
        ws = params.get("workspace_id")
        return {"type": "pane_list", "panes": [p.info() for p in self.panes.values() if ws in (None, p.workspace_id)]}

    def m_pane_get(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"type": "pane_info", "pane": self._pane(self._req(params, "pane_id")).info()}

    def m_agent_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"type": "agent_list", "agents": [p.agent_info() for p in self.panes.values() if p.agent]}

    def m_agent_get(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"type": "agent_info", "agent": self._agent(self._req(params, "target")).agent_info()}

    def m_pane_send_text(self, params: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(self._req(params, "pane_id"))
        self._write(pane, self._req(params, "text"))  # verbatim: no bracketed paste, no filtering
        return {"type": "ok"}

    def m_pane_send_keys(self, params: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(self._req(params, "pane_id"))
        encoded = [encode_key(str(k)) for k in self._req(params, "keys", list)]  # all validated first
        self._write(pane, "".join(encoded))
        return {"type": "ok"}

    def m_pane_send_input(self, params: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(self._req(params, "pane_id"))
        text = params.get("text", "")
        encoded = [encode_key(str(k)) for k in params.get("keys", [])]
        wrapped = f"{PASTE_START}{text}{PASTE_END}" if text and pane.bracketed_paste else text
        self._write(pane, wrapped + "".join(encoded))  # one write
        return {"type": "ok"}

    def m_agent_prompt(self, params: dict[str, Any], conn: socket.socket | None = None) -> dict[str, Any]:
        with self.lock:
            pane = self._agent(self._req(params, "target"))
            text = self._req(params, "text")
            if not text:
                raise ApiError("empty_agent_prompt", "prompt text is empty")
            if self.protocol >= 22 and pane.agent_status == "blocked":
                raise ApiError("agent_blocked", f"agent {pane.pane_id} is blocked")
            self._write(pane, f"{PASTE_START}{text}{PASTE_END}" if pane.bracketed_paste else text)

            def submit() -> None:
                with self.lock:
                    if not pane.closed:
                        self._write(pane, "\r")

            if self.protocol >= 22:
                submit()
            else:  # 0.8.x: Enter follows 300 ms later; the call returns at once
                threading.Timer(0.3, submit).start()
            seq = pane.state_change_seq
        wait = params.get("wait")
        if wait and conn is not None:
            until = wait.get("until") or ["idle", "done"]
            stall_at = time.monotonic() + self.prompt_stall

            def check() -> Any:
                if pane.closed or not pane.agent:
                    raise ApiError("agent_not_running", f"agent in {pane.pane_id} is no longer running")
                if pane.state_change_seq == seq and time.monotonic() >= stall_at:
                    raise ApiError(
                        "agent_prompt_stalled",
                        f"agent {pane.pane_id} did not change state within {self.prompt_stall:g}s of the prompt",
                    )
                return True if pane.state_change_seq > seq and pane.agent_status in until else None

            self._hold(conn, wait.get("timeout_ms"), check, "agent status")
        with self.lock:
            return {"type": "agent_prompted", "agent": pane.agent_info()}

    def m_pane_split(self, params: dict[str, Any]) -> dict[str, Any]:
        target = params.get("target_pane_id")
        if target is not None:
            self._pane(target)
        env = params.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise ApiError("invalid_env", "env values must be strings")
        pane = self.add_pane(ready=False)
        pane.cwd = params.get("cwd")
        # README.md#herdr-env: herdr-managed keys override the caller's env; CODEX_THREAD_ID is removed
        pane.env = {k: v for k, v in env.items() if k != "CODEX_THREAD_ID"}
        pane.env.update(
            {
                "HERDR_ENV": "1",
                "HERDR_SOCKET_PATH": str(self.path),
                "HERDR_BIN_PATH": self.bin_path,
                "HERDR_WORKSPACE_ID": pane.workspace_id,
                "HERDR_TAB_ID": pane.tab_id,
                "HERDR_PANE_ID": pane.pane_id,
                "TERM": "xterm-256color",
                "COLORTERM": "truecolor",
            }
        )

        def shell_ready() -> None:  # the shell prints its prompt and enables 2004 a bit later
            with self.lock:
                pane.prompt, pane.bracketed_paste = "$ ", True

        threading.Timer(0.1, shell_ready).start()
        return {"type": "pane_info", "pane": pane.info()}

    def m_pane_read(self, params: dict[str, Any]) -> dict[str, Any]:
        pane = self._pane(self._req(params, "pane_id"))
        source = params.get("source", "visible")
        if source not in ("visible", "recent", "recent_unwrapped", "detection"):
            raise invalid(f"unknown variant `{source}`")
        lines = min(int(params.get("lines", 1000)), 1000)
        text = "\n".join(pane.text().split("\n")[-lines:])
        return {
            "type": "pane_read",
            "read": {
                "pane_id": pane.pane_id,
                "workspace_id": pane.workspace_id,
                "tab_id": pane.tab_id,
                "source": source,
                "format": "text",
                "text": text,
                "revision": pane.revision,
                "truncated": False,
            },
        }

    def m_pane_wait_for_output(self, params: dict[str, Any], conn: socket.socket) -> dict[str, Any]:
        with self.lock:
            pane = self._pane(self._req(params, "pane_id"))
            match = self._req(params, "match", dict)
        value = str(match.get("value", ""))
        try:
            regex = re.compile(value if match.get("type") == "regex" else re.escape(value))
        except re.error as exc:
            raise ApiError("invalid_regex", f"invalid regex: {exc}") from None

        def check() -> Any:
            if pane.closed:
                raise ApiError("pane_not_found", f"pane {pane.pane_id} not found")
            for line in pane.text().split("\n"):
                if regex.search(line):
                    return line
            return None

        line = self._hold(conn, params.get("timeout_ms"), check, "output match")
        with self.lock:
            read = self.m_pane_read({"pane_id": pane.pane_id, "source": params.get("source", "recent")})["read"]
        return {
            "type": "output_matched",
            "pane_id": pane.pane_id,
            "revision": pane.revision,
            "matched_line": line,
            "read": read,
        }

    def m_agent_wait(self, params: dict[str, Any], conn: socket.socket) -> dict[str, Any]:
        with self.lock:
            pane = self._agent(self._req(params, "target"))
        until = params.get("until") or ["idle", "done", "blocked"]
        if any(s not in STATUSES for s in until):
            raise invalid("unknown agent status in `until`")

        def check() -> Any:
            if pane.closed or not pane.agent:
                raise ApiError("agent_not_running", f"agent in {pane.pane_id} is no longer running")
            return pane.agent_info() if pane.agent_status in until else None

        return {"type": "agent_info", "agent": self._hold(conn, params.get("timeout_ms"), check, "agent status")}

    def m_events_wait(self, params: dict[str, Any], conn: socket.socket) -> dict[str, Any]:
        match = self._req(params, "match_event", dict)
        if match.get("event") != "pane_agent_status_changed":
            raise ApiError("unsupported_event_wait_match", "only pane_agent_status_changed can be waited for")
        with self.lock:
            pane = self._pane(str(match.get("pane_id")))

        def check() -> Any:
            if pane.closed:
                raise ApiError("agent_not_running", f"pane {pane.pane_id} closed")
            if pane.agent_status == match.get("agent_status"):
                data = {
                    "type": "pane_agent_status_changed",
                    "pane_id": pane.pane_id,
                    "workspace_id": pane.workspace_id,
                    "agent_status": pane.agent_status,
                }
                if pane.agent:
                    data["agent"] = pane.agent
                return {"event": "pane_agent_status_changed", "data": data}
            return None

        return {"type": "wait_matched", "event": self._hold(conn, params.get("timeout_ms"), check, "event match")}
