"""The tmux launcher: spawn in a new window, readiness, status, stop — on a private server."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from tmux_helpers import wait_for, write_config

from bridgecli.envelope import Envelope
from bridgecli.errors import BridgeError, Timeout
from bridgecli.interfaces import Entity, LaunchSpec
from bridgecli_tmux.client import tmux_available

pytestmark = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")


@pytest.fixture
def launcher(xdg: Path, tmux_server):
    from bridgecli import config, plugins

    write_config(xdg, f'[plugins.tmux]\nsocket = "{tmux_server.socket}"\nsession = "agents"\n')
    plugins.reset()
    return plugins.get().provider("launchers", "tmux")(config.load())


def spec(command, tmp: Path, **profile) -> LaunchSpec:
    gid = str(uuid.uuid4())
    return LaunchSpec(
        gid=gid,
        label="worker",
        role="agent",
        profile_name="p",
        command=command,
        cwd=str(tmp),
        env={"BRIDGE_GID": gid, "BRIDGE_HOST_ID": "test"},
        profile={"launcher": "tmux", **profile},
        log_dir=tmp,
    )


def test_spawn_ready_deliver_stop(launcher, tmux_server, make_backend, short_tmp) -> None:
    s = spec("echo READY gid=$BRIDGE_GID in $(pwd); exec cat", short_tmp, ready_pattern=r"READY gid=\S+")
    handle = launcher.start(s)
    assert handle.launcher == "tmux" and handle.deliver == f"tmux:{handle.data['pane_id']}"
    assert tmux_server.run("display-message", "-p", "-t", handle.data["pane_id"], "#{session_name}").strip() == "agents"
    launcher.wait_ready(handle, timeout=30)
    text = tmux_server.capture(handle.data["pane_id"])
    assert f"READY gid={s.gid} in {short_tmp}" in text  # env and cwd reached the command
    wait_for(lambda: launcher.status(handle) == "running", what="cat in the foreground")
    # the handle's deliver string is usable as is by the tmux backend
    backend = make_backend()
    entity = Entity(gid=s.gid, label="worker", role="agent", deliver=handle.deliver, host="test", created=time.time())
    backend.deliver(entity, Envelope(kind="SEND", sender=s.gid, recipient=s.gid, content="hi"))
    json.dumps(dict(handle.data))  # stored with the entity
    launcher.stop(handle)
    assert launcher.status(handle) == "gone"
    launcher.stop(handle)  # idempotent


def test_argv_command_and_split_pane(launcher, tmux_server, short_tmp) -> None:
    handle = launcher.start(
        spec(["sh", "-c", "echo argv-ok; exec sleep 600"], short_tmp, ready_pattern="argv-ok", tmux_split="pane")
    )
    launcher.wait_ready(handle, timeout=30)
    panes = tmux_server.run("list-panes", "-t", "agents:", "-F", "#{pane_id}").split()
    assert handle.data["pane_id"] in panes and len(panes) == 2
    launcher.stop(handle)


def test_failed_command_reports_its_last_lines(launcher, short_tmp) -> None:
    # The pause lets tmux read the line: tmux 3.3 on Linux can drop what a program wrote in the
    # instant before it exited (about 1 run in 100 here), which no reader of the pane can recover.
    command = "echo 'agent: bad flag --frob' >&2; sleep 0.2; exit 3"
    handle = launcher.start(spec(command, short_tmp, ready_pattern="never"))
    with pytest.raises(BridgeError, match="bad flag --frob"):
        launcher.wait_ready(handle, timeout=30)
    assert launcher.status(handle) == "gone"
    launcher.stop(handle)


def test_ready_pattern_timeout(launcher, short_tmp) -> None:
    handle = launcher.start(spec("exec sleep 600", short_tmp, ready_pattern="will-not-appear"))
    with pytest.raises(Timeout, match="will-not-appear"):
        launcher.wait_ready(handle, timeout=0.5)
    launcher.stop(handle)


def test_bad_profile(launcher, short_tmp) -> None:
    with pytest.raises(BridgeError, match="tmux_split"):
        launcher.start(spec("true", short_tmp, tmux_split="diagonal"))
    with pytest.raises(BridgeError, match="ready_pattern"):
        launcher.start(spec("true", short_tmp, ready_pattern="("))


def test_bridge_plugins_lists_tmux(xdg: Path) -> None:
    """The real CLI, as a subprocess: the entry point is found and attributed."""
    bridge = str(Path(sys.executable).with_name("bridge"))
    out = subprocess.run([bridge, "plugins", "--json"], capture_output=True, text=True, check=True, timeout=60)
    data = json.loads(out.stdout)
    tmux = next(p for p in data["plugins"] if p["name"] == "tmux")
    assert tmux["builtin"] is False
    assert tmux["provides"] == {
        "backends": ["tmux"],
        "launchers": ["tmux"],
        "profile_settings": ["tmux"],
        "plugin_settings": ["tmux"],
    }
    assert "tmux" not in data["failures"]
