"""The herdr launcher against the fake: split, run, readiness, stop."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from fake_herdr import FakeHerdr

from bridgecli.errors import BridgeError, Timeout
from bridgecli.interfaces import LaunchSpec


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
        profile={"launcher": "herdr", **profile},
        log_dir=tmp,
    )


def test_spawn_ready_stop(make_launcher, herdr: FakeHerdr, short_tmp: Path) -> None:
    launcher = make_launcher()
    s = spec(["fake-agent", "--model", "x y"], short_tmp)
    handle = launcher.start(s)
    pane_id = handle.data["pane_id"]
    assert handle.launcher == "herdr" and handle.deliver == f"herdr:{pane_id}"
    pane = herdr.panes[pane_id]
    split = next(r for r in herdr.requests if r["method"] == "pane.split")["params"]
    assert split["env"]["BRIDGE_GID"] == s.gid and split["cwd"] == str(short_tmp) and split["focus"] is False
    # the command was typed only after the shell showed its prompt (bracketed paste on by then)
    assert herdr.pane_bytes(pane_id) == b"\x1b[200~fake-agent --model 'x y'\x1b[201~\r"
    launcher.wait_ready(handle, timeout=20)
    assert pane.agent == "claude" and launcher.status(handle) == "idle"
    assert f"BRIDGE_GID={s.gid}" in "\n".join(pane.screen)
    json.dumps(dict(handle.data))
    launcher.stop(handle)
    assert pane_id not in herdr.panes and launcher.status(handle) == "gone"
    assert pane.commands[-1] == "exit"
    launcher.stop(handle)  # idempotent


def test_ready_pattern(make_launcher, herdr: FakeHerdr, short_tmp: Path) -> None:
    launcher = make_launcher()
    handle = launcher.start(spec("fake-agent", short_tmp, ready_pattern=r"fake agent ready \(BRIDGE_GID="))
    launcher.wait_ready(handle, timeout=20)
    assert any(r["method"] == "pane.wait_for_output" for r in herdr.requests[-3:])


def test_readiness_timeout(make_launcher, herdr: FakeHerdr, short_tmp: Path) -> None:
    launcher = make_launcher()
    handle = launcher.start(spec("not-an-agent", short_tmp))
    with pytest.raises(Timeout, match="no agent became idle"):
        launcher.wait_ready(handle, timeout=0.5)
    handle = launcher.start(spec("not-an-agent", short_tmp, ready_pattern="never"))
    with pytest.raises(Timeout, match="ready_pattern"):
        launcher.wait_ready(handle, timeout=0.3)


def test_split_target_and_errors(make_launcher, herdr: FakeHerdr, short_tmp: Path) -> None:
    base = herdr.add_pane()
    launcher = make_launcher(split_from=base.pane_id)
    launcher.start(spec("true", short_tmp, herdr_direction="down"))
    split = [r for r in herdr.requests if r["method"] == "pane.split"][-1]["params"]
    assert split["target_pane_id"] == base.pane_id and split["direction"] == "down"
    with pytest.raises(BridgeError, match="herdr_direction"):
        launcher.start(spec("true", short_tmp, herdr_direction="up"))
    with pytest.raises(BridgeError, match="pane w1:p99 not found"):
        launcher.start(spec("true", short_tmp, herdr_pane="w1:p99"))


def test_bridge_plugins_lists_herdr(xdg: Path) -> None:
    bridge = str(Path(sys.executable).with_name("bridge"))
    out = subprocess.run([bridge, "plugins", "--json"], capture_output=True, text=True, check=True, timeout=60)
    data = json.loads(out.stdout)
    herdr = next(p for p in data["plugins"] if p["name"] == "herdr")
    assert herdr["builtin"] is False
    assert herdr["provides"] == {
        "backends": ["herdr"],
        "launchers": ["herdr"],
        "profile_settings": ["herdr"],
        "plugin_settings": ["herdr"],
    }
    assert "herdr" not in data["failures"]
