"""The ``codex`` launcher with the real codex: start, readiness, delivery, status, stop."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from codex_helpers import turns, user_texts, wait_for

from bridgecli.envelope import Envelope
from bridgecli.errors import BridgeError, ConfigError
from bridgecli.interfaces import Entity, LaunchSpec
from bridgecli_codex.client import parse_address
from bridgecli_codex.launcher import group_alive


def spec(command, tmp: Path, env: dict[str, str], **profile) -> LaunchSpec:
    gid = str(uuid.uuid4())
    log_dir = tmp / "spawn" / "worker"
    log_dir.mkdir(parents=True, mode=0o700)
    return LaunchSpec(
        gid=gid,
        label="worker",
        role="agent",
        profile_name="p",
        command=command,
        cwd=env["HOME"],
        env={**env, "BRIDGE_GID": gid, "BRIDGE_HOST_ID": "test"},
        profile={"launcher": "codex", **profile},
        log_dir=log_dir,
    )


@pytest.mark.slow  # stop waits out the server's SIGTERM grace while a turn runs
def test_spawn_ready_deliver_stop(make_launcher, make_backend, short_tmp, codex_bin, codex_env) -> None:
    launcher = make_launcher()
    s = spec([str(codex_bin)], short_tmp, codex_env)
    handle = launcher.start(s)
    try:
        address = parse_address(handle.deliver.removeprefix("codex:"))
        assert handle.launcher == "codex" and handle.deliver.startswith("codex:unix:")
        assert address.endpoint.target == str(s.log_dir / "codex" / "app.sock")
        assert stat.S_IMODE((s.log_dir / "codex").stat().st_mode) == 0o700
        assert handle.data["thread_id"] == address.thread_id
        assert handle.data["attach"] == [str(codex_bin), "resume", "--remote", address.endpoint.url, address.thread_id]
        json.dumps(dict(handle.data))  # stored with the entity
        launcher.wait_ready(handle, timeout=30)
        assert launcher.status(handle) == "idle"

        backend = make_backend()
        worker = Entity(gid=s.gid, label="worker", role="agent", deliver=handle.deliver, host="t", created=time.time())
        message = Envelope(kind="SEND", sender=s.gid, recipient=s.gid, content="hi there")
        outcome = backend.deliver(worker, message)
        assert outcome is not None and [(t["id"], user_texts(t)[0][0]) for t in turns(address)] == [
            (outcome.ref, message.msg_id)
        ]
        assert launcher.status(handle) == "working"
    finally:
        launcher.stop(handle)
    assert launcher.status(handle) == "gone" and backend.status(worker) == "gone"
    assert not group_alive(int(handle.data["pid"]))
    assert not os.path.lexists(address.endpoint.target)
    launcher.stop(handle)  # idempotent


def test_first_prompt_is_the_threads_first_turn(make_launcher, short_tmp, codex_bin, codex_env) -> None:
    """``bridge spawn --prompt`` puts the prompt after ``--`` (the codex kind's prompt_args)."""
    launcher = make_launcher()
    handle = launcher.start(spec([str(codex_bin), "--", "first-task"], short_tmp, codex_env))
    try:
        launcher.wait_ready(handle, timeout=30)
        (turn,) = turns(parse_address(handle.deliver.removeprefix("codex:")))
        assert [text for _, text in user_texts(turn)] == ["first-task"]
    finally:
        launcher.stop(handle)


def test_a_failing_command_reports_its_output(make_launcher, short_tmp, codex_env) -> None:
    launcher = make_launcher()
    command = ["sh", "-c", "echo 'codex: unknown option --frob' >&2; exit 3", "codex"]
    with pytest.raises(BridgeError, match="unknown option --frob"):
        launcher.start(spec(command, short_tmp, codex_env))


def test_bad_profiles(make_launcher, short_tmp, codex_env) -> None:
    launcher = make_launcher()
    with pytest.raises(ConfigError, match="codex_tui"):
        launcher.start(spec(["codex"], short_tmp / "a", codex_env, codex_tui="window"))
    with pytest.raises(ConfigError, match="names no codex program"):
        launcher.start(spec(["--", "hi"], short_tmp / "b", codex_env))


@pytest.mark.slow
def test_the_tui_opens_on_the_thread_in_tmux(make_launcher, make_backend, short_tmp, codex_bin, codex_env) -> None:
    """``codex_tui = "tmux"``: the attach command runs in a new window, shows the thread and
    a message delivered to it; stop closes the window. The TUI needs a signed-in CODEX_HOME."""
    subprocess.run(
        [str(codex_bin), "login", "--with-api-key"],
        input="sk-made-up-for-tests",
        env=codex_env,
        capture_output=True,
        text=True,
        check=True,
    )
    tmux_sock = str(short_tmp / "tm")
    launcher = make_launcher(tmux_socket=tmux_sock)
    s = spec([str(codex_bin)], short_tmp, codex_env, codex_tui="tmux", codex_tui_session="agents", ready_timeout=60)
    handle = launcher.start(s)
    tmux = ["tmux", "-S", tmux_sock]
    try:
        pane = str(handle.data["tui_pane"])

        def screen() -> str:
            return subprocess.run([*tmux, "capture-pane", "-p", "-t", pane], capture_output=True, text=True).stdout

        wait_for(lambda: "worker" in screen() and "OpenAI Codex" in screen(), timeout=60, what="the TUI on the thread")
        worker = Entity(gid=s.gid, label="worker", role="agent", deliver=handle.deliver, host="t", created=time.time())
        message = Envelope(kind="SEND", sender=s.gid, recipient=s.gid, content="shown in the TUI")
        make_backend().deliver(worker, message)
        wait_for(lambda: f"[bridge {message.msg_id[:8]}]" in screen(), timeout=30, what="the message in the TUI")
    finally:
        launcher.stop(handle)
        panes = subprocess.run([*tmux, "list-panes", "-a", "-F", "#{pane_id}"], capture_output=True, text=True)
        subprocess.run([*tmux, "kill-server"], capture_output=True)
    assert pane not in panes.stdout.split()


def test_bridge_plugins_lists_codex(xdg: Path) -> None:
    """The real CLI, as a subprocess: the entry point is found and attributed."""
    bridge = str(Path(sys.executable).with_name("bridge"))
    out = subprocess.run([bridge, "plugins", "--json"], capture_output=True, text=True, check=True, timeout=60)
    data = json.loads(out.stdout)
    codex = next(p for p in data["plugins"] if p["name"] == "codex")
    assert codex["builtin"] is False
    assert codex["provides"] == {
        "backends": ["codex"],
        "launchers": ["codex"],
        "profile_settings": ["codex"],
        "plugin_settings": ["codex"],
    }
    assert "codex" not in data["failures"]
