"""`bridge token …` as a user runs it (real subprocesses, isolated XDG dirs)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from tests.support.env import run_bridge


def token_path(env) -> Path:
    return Path(env["XDG_CACHE_HOME"]) / "opencode-browser" / "bridge.json"


def test_lifecycle_path_show_rotate_set_clear(bridge_home):
    env = bridge_home.env
    path = run_bridge("token", "path", env=env)
    assert (path.returncode, path.stdout.strip()) == (0, str(token_path(env)))

    missing = run_bridge("token", "show", env=env)
    assert missing.returncode == 6 and "no token file" in missing.stderr
    assert "bridge browser serve" in missing.stderr

    rotated = run_bridge("token", "rotate", env=env)
    token = rotated.stdout.strip()
    assert rotated.returncode == 0 and len(token) >= 40 and "restart the broker" in rotated.stderr
    file = token_path(env)
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert stat.S_IMODE(file.parent.stat().st_mode) == 0o700
    assert run_bridge("token", "show", env=env).stdout.strip() == token
    again = run_bridge("token", "rotate", env=env).stdout.strip()
    assert again != token

    short = run_bridge("token", "set", "short", env=env)
    assert short.returncode == 3 and "at least 16" in short.stderr
    spaced = run_bridge("token", "set", "has spaces in it but long", env=env)
    assert spaced.returncode == 3
    chosen = "my-chosen-token-0123456789"
    assert run_bridge("token", "set", chosen, env=env).returncode == 0
    shown = json.loads(run_bridge("token", "show", "--json", env=env).stdout)
    assert shown["token"] == chosen and shown["path"] == str(file) and shown["port"] == 4517

    cleared = run_bridge("token", "clear", env=env)
    assert cleared.returncode == 0 and "removed" in cleared.stderr and not file.exists()
    assert "no token file" in run_bridge("token", "clear", env=env).stderr


def test_unsafe_permissions_are_refused_like_ssh(bridge_home):
    env = bridge_home.env
    run_bridge("token", "rotate", env=env)
    file = token_path(env)
    os.chmod(file, 0o644)
    shown = run_bridge("token", "show", env=env)
    assert shown.returncode == 12
    assert "accessible by group or others (mode 0644)" in shown.stderr
    assert f"chmod 600 {file}" in shown.stderr and shown.stdout == ""


def test_explicit_token_mismatch_is_warned(bridge_home):
    env = bridge_home.env
    run_bridge("token", "rotate", env=env)
    for var in ("BRIDGE_BROWSER_TOKEN", "OCB_TOKEN"):
        shown = run_bridge("token", "show", env=dict(env, **{var: "explicit-token-12345"}))
        assert shown.returncode == 0 and "sets a different token" in shown.stderr
        assert var in shown.stderr


def test_path_and_rotate_speak_json(bridge_home):
    env = bridge_home.env
    file = token_path(env)
    path = run_bridge("token", "path", "--json", env=env)
    assert path.returncode == 0 and json.loads(path.stdout) == {"path": str(file), "exists": False}
    rotated = run_bridge("token", "rotate", "--json", env=env)
    assert rotated.returncode == 0 and "restart the broker" in rotated.stderr  # notes stay on stderr
    data = json.loads(rotated.stdout)
    assert data == json.loads(run_bridge("token", "show", "--json", env=env).stdout)
    assert data["path"] == str(file) and data["port"] == 4517 and len(data["token"]) >= 40
    assert json.loads(run_bridge("token", "path", "--json", env=env).stdout)["exists"] is True
