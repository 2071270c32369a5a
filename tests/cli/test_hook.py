"""`bridge hook CLIENT EVENT`: hostile input, no gateway, and the requests it makes.

The real console script runs as a subprocess, as a client's hook would run it. Where a
gateway is wanted, a Unix socket in the test records each request line and answers it as the
gateway's local API would (``{"ok": true, ...}``), so the test reads exactly what was sent.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridgecli import hooks
from tests.support.env import BRIDGE_BIN


def run_hook(env: dict[str, str], *args: str, data: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([BRIDGE_BIN, "hook", *args], input=data, env=env, capture_output=True, timeout=30)


@pytest.fixture
def env(bridge_home) -> dict[str, str]:
    """A pane's environment: no gateway listening on the isolated host's socket."""
    return {**bridge_home.env, "TMUX_PANE": "%7"}


class Recorder:
    """A Unix socket that answers every request line with ``{"ok": true}`` and keeps them."""

    def __init__(self, path: str, answer: dict | None = None) -> None:
        self.requests: list[dict] = []
        self.answer = answer or {"ok": True}
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as stream:
                for line in stream:
                    self.requests.append(json.loads(line))
                    stream.write(json.dumps(self.answer).encode() + b"\n")
                    stream.flush()

    def close(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        self.thread.join(5)


@pytest.fixture
def gateway(env) -> Iterator[Recorder]:
    path = Path(env["XDG_RUNTIME_DIR"]) / "bridge" / "gateway.sock"
    path.parent.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(str(path))
    yield recorder
    recorder.close()


def prompt(text: str) -> bytes:
    return json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": text}).encode()


HOSTILE = {
    "empty": b"",
    "not json": b"hello [bridge 0123abcd] world",
    "binary": bytes(range(256)) * 64,
    "a JSON list": b'["[bridge 0123abcd]"]',
    "prompt not a string": b'{"prompt": ["[bridge 0123abcd]"]}',
    "deeply nested": b"[" * 100_000,
    "huge": prompt("[bridge 0123abcd] " + "x" * (8 << 20)),
}


@pytest.mark.parametrize("data", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize("event", hooks.EVENTS)
def test_hostile_input_without_a_gateway_exits_0_and_prints_nothing(env, data, event) -> None:
    done = run_hook(env, "claude-code", event, data=data)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


@pytest.mark.parametrize("args", [(), ("claude-code",), ("nope", "prompt"), ("claude-code", "nope"), ("a", "b", "c")])
def test_a_bad_command_line_still_exits_0_silently(env, args) -> None:
    done = run_hook(env, *args, data=prompt("[bridge 0123abcd]"))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_debug_explains_on_stderr_only(env) -> None:
    done = run_hook({**env, "BRIDGE_HOOK_DEBUG": "1"}, "claude-code", "prompt", data=prompt("[bridge 0123abcd]"))
    assert done.returncode == 0 and done.stdout == b""
    assert b"no gateway" in done.stderr


def test_help_is_clicks(env) -> None:
    done = subprocess.run([BRIDGE_BIN, "hook", "-h"], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "CLIENT is claude-code, gemini or codex" in done.stdout


def test_markers_deduped_in_order_capped_and_only_the_exact_form() -> None:
    text = "[bridge 0123abcd] a [bridge 0123abcd] [bridge 89abcdef]\n[end bridge 0123abcd]"
    text += " [bridge 0123ABCD] [bridge 0123abc] [bridge 0123abcde] [bridge 0123abcz] [bridge"
    assert hooks.markers(text) == ["0123abcd", "89abcdef"]
    many = " ".join(f"[bridge {n:08x}]" for n in range(1000))
    assert hooks.markers(many) == [f"{n:08x}" for n in range(64)]


def test_prompt_reports_its_markers_as_seen_then_working(env, gateway) -> None:
    text = "[bridge 0123abcd] SEND from main\n│ hi\n[end bridge 0123abcd]\n[bridge 89abcdef] ASK"
    done = run_hook(env, "claude-code", "prompt", data=prompt(text))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    who = {"gid": None, "pane": "%7", "how": "hook:claude-code"}
    assert gateway.requests == [
        {"op": "seen", "markers": ["0123abcd", "89abcdef"], **who},
        {"op": "activity", "status": "working", **who},
    ]


def test_a_prompt_without_markers_reports_only_working(env, gateway) -> None:
    run_hook(env, "gemini", "prompt", data=prompt("just a question"))
    assert gateway.requests == [
        {"op": "activity", "status": "working", "gid": None, "pane": "%7", "how": "hook:gemini"}
    ]


def test_a_thousand_markers_send_64_in_one_call(env, gateway) -> None:
    run_hook(env, "claude-code", "prompt", data=prompt(" ".join(f"[bridge {n:08x}]" for n in range(1000))))
    [seen] = [r for r in gateway.requests if r["op"] == "seen"]
    assert len(seen["markers"]) == 64


def test_bridge_gid_wins_over_the_pane(env, gateway) -> None:
    run_hook({**env, "BRIDGE_GID": "g-1"}, "claude-code", "stop", data=b'{"hook_event_name":"Stop"}')
    assert gateway.requests == [
        {"op": "activity", "status": "idle", "gid": "g-1", "pane": None, "how": "hook:claude-code"}
    ]


@pytest.mark.parametrize(
    ("client", "payload", "status"),
    [
        (
            "claude-code",
            {"notification_type": "permission_prompt", "message": "Claude needs your permission"},
            "waiting",
        ),
        ("claude-code", {"notification_type": "idle_prompt", "message": "Claude is waiting for your input"}, None),
        ("claude-code", {"notification_type": "auth_success", "message": "ok"}, None),
        ("claude-code", {"message": "Claude needs your permission to use Bash"}, "waiting"),
        ("gemini", {"notification_type": "ToolPermission", "message": "run ls?"}, "waiting"),
        ("gemini", {"notification_type": "Other"}, None),
        ("codex", {"hook_event_name": "PermissionRequest", "tool_name": "Bash"}, "waiting"),
    ],
)
def test_notify_reports_waiting_only_for_a_permission_prompt(env, gateway, client, payload, status) -> None:
    run_hook(env, client, "notify", data=json.dumps(payload).encode())
    assert [r["status"] for r in gateway.requests] == ([status] if status else [])


def test_no_identity_no_call(env, gateway) -> None:
    bare = {k: v for k, v in env.items() if k not in ("TMUX_PANE", "BRIDGE_GID")}
    run_hook(bare, "claude-code", "prompt", data=prompt("[bridge 0123abcd]"))
    assert gateway.requests == []


def test_a_gateway_error_answer_is_swallowed(env) -> None:
    path = Path(env["XDG_RUNTIME_DIR"]) / "bridge" / "gateway.sock"
    path.parent.mkdir(parents=True, exist_ok=True)
    error = {"ok": False, "error": {"code": "NOT_FOUND", "message": "no entity", "hint": ""}}
    recorder = Recorder(str(path), answer=error)
    try:
        done = run_hook(env, "claude-code", "prompt", data=prompt("[bridge 0123abcd]"))
    finally:
        recorder.close()
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert [r["op"] for r in recorder.requests] == ["seen", "activity"]


def test_a_gateway_that_never_answers_costs_at_most_the_budget(env) -> None:
    """A listener that accepts and never reads: the hook still ends, silently, with 0."""
    path = Path(env["XDG_RUNTIME_DIR"]) / "bridge" / "gateway.sock"
    path.parent.mkdir(parents=True, exist_ok=True)
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(str(path))
    mute.listen()
    try:
        done = run_hook(env, "claude-code", "prompt", data=prompt("[bridge 0123abcd]"))
    finally:
        mute.close()
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_stdin_left_open_does_not_hold_the_hook(env) -> None:
    """A client that never closes the hook's stdin: the read gives up within the budget."""
    read, write = os.pipe()
    try:
        done = subprocess.run(
            [BRIDGE_BIN, "hook", "claude-code", "prompt"], stdin=read, env=env, capture_output=True, timeout=30
        )
    finally:
        os.close(read), os.close(write)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
