"""`bridge install`/`uninstall` and the hooks in Claude Code's and Gemini's settings.json.

Real files in a temp HOME, the real `bridge` as a subprocess (the `host` fixture and helpers
of tests/cli/test_install.py).
"""

from __future__ import annotations

import json

import pytest

from tests.cli import test_install
from tests.cli.test_install import ABS, backups, bridge

host = test_install.host  # the fixture: a temp HOME, no client on PATH, a project dir

EVENTS = {
    "claude-code": (
        ".claude",
        {"UserPromptSubmit": "prompt", "Stop": "stop", "StopFailure": "stop", "Notification": "notify"},
        5,
    ),
    "gemini": (".gemini", {"BeforeAgent": "prompt", "AfterAgent": "stop", "Notification": "notify"}, 5000),
    "codex": ("codex", {"UserPromptSubmit": "prompt", "Stop": "stop", "PermissionRequest": "notify"}, 5),
}
FILES = {"claude-code": "settings.json", "gemini": "settings.json", "codex": "hooks.json"}
OTHER = {"type": "command", "command": "notify-send done"}


def ours(client: str, event: str) -> dict:
    _, _, timeout = EVENTS[client]
    return {"type": "command", "command": f"{ABS} hook {client} {event}", "timeout": timeout}


@pytest.mark.parametrize("client", EVENTS)
def test_install_adds_the_hooks_keeps_others_and_is_idempotent(host, client) -> None:
    """Also: Codex's hooks.json is JSON beside its TOML config, and the user is told to trust them."""
    home, env, _ = host
    folder, events, _ = EVENTS[client]
    (home / folder).mkdir()
    path = home / folder / FILES[client]
    stop = next(name for name, event in events.items() if event == "stop")
    original = {"model": "x", "hooks": {stop: [{"matcher": "", "hooks": [OTHER]}], "PreToolUse": [{"hooks": [OTHER]}]}}
    path.write_text(json.dumps(original))

    done = bridge(env, "install", client)
    assert done.returncode == 0, done.stderr
    assert f"added bridge's hooks in {path}" in done.stdout
    assert ("open /hooks in Codex" in done.stderr) == (client == "codex")
    data = json.loads(path.read_text())
    assert data["model"] == "x" and data["hooks"]["PreToolUse"] == [{"hooks": [OTHER]}]
    for name, event in events.items():
        groups = data["hooks"][name]
        assert groups[-1] == {"hooks": [ours(client, event)]}
        if name == stop:
            assert groups[0] == {"matcher": "", "hooks": [OTHER]}
    assert len(backups(path)) == 1

    before = path.read_bytes()
    again = bridge(env, "install", client)
    assert again.returncode == 0 and "bridge's hooks already as wanted" in again.stdout
    assert path.read_bytes() == before and len(backups(path)) == 1

    gone = bridge(env, "uninstall", client)
    assert gone.returncode == 0 and f"removed bridge's hooks in {path}" in gone.stdout
    left = json.loads(path.read_text())
    assert left["hooks"] == original["hooks"] and left["model"] == "x"


def test_uninstall_removes_only_bridges_hooks_wherever_they_sit(host) -> None:
    home, env, _ = host
    (home / ".claude").mkdir()
    path = home / ".claude" / "settings.json"
    mixed = {
        "hooks": [
            ours("claude-code", "stop"),
            OTHER,
            {"type": "command", "command": "/old/bridge hook claude-code stop"},
        ]
    }
    path.write_text(json.dumps({"hooks": {"Stop": [mixed]}, "theme": "dark"}))
    assert bridge(env, "uninstall", "claude-code").returncode == 0
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [{"hooks": [OTHER]}]}, "theme": "dark"}


def test_an_older_bridges_hooks_are_updated_in_place_of_being_doubled(host) -> None:
    home, env, _ = host
    (home / ".claude").mkdir()
    path = home / ".claude" / "settings.json"
    old = {"type": "command", "command": "/gone/venv/bin/bridge hook claude-code prompt"}
    path.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [old]}]}}))
    done = bridge(env, "install", "claude-code", "--json")
    assert done.returncode == 0, done.stderr
    [item] = json.loads(done.stdout)["clients"]
    assert item["hooks"]["action"] == "updated"
    assert json.loads(path.read_text())["hooks"]["UserPromptSubmit"] == [{"hooks": [ours("claude-code", "prompt")]}]


def test_no_hooks_and_project_scope_leave_settings_alone(host) -> None:
    home, env, project = host
    (home / ".claude").mkdir()
    assert bridge(env, "install", "claude-code", "--no-hooks").returncode == 0
    assert bridge(env, "install", "claude-code", "--scope", "project", cwd=project).returncode == 0
    assert not (home / ".claude" / "settings.json").exists()
    assert not (project / ".claude").exists()


def test_gemini_gets_entry_and_hooks_in_one_write(host) -> None:
    home, env, _ = host
    (home / ".gemini").mkdir()
    path = home / ".gemini" / "settings.json"
    path.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    done = bridge(env, "install", "gemini")
    assert done.returncode == 0, done.stderr
    data = json.loads(path.read_text())
    assert data["mcpServers"]["bridge"]["command"] == ABS and set(data["hooks"]) == set(EVENTS["gemini"][1])
    assert data["security"] == {"auth": {"selectedType": "gemini-api-key"}}
    assert len(backups(path)) == 1


@pytest.mark.parametrize(
    "content",
    ['{"hooks": {"Stop": [', '{"hooks": []}', '{"hooks": {"Stop": {"hooks": []}}}', '{"hooks": {"Stop": ["x"]}}', "[]"],
    ids=["broken", "hooks a list", "event an object", "group a string", "top a list"],
)
def test_a_settings_file_that_does_not_fit_is_refused_and_nothing_written(host, content) -> None:
    home, env, _ = host
    (home / ".claude").mkdir()
    path = home / ".claude" / "settings.json"
    path.write_text(content)
    done = bridge(env, "install", "claude-code")
    assert done.returncode == 3, done.stdout + done.stderr
    assert str(path) in done.stderr and "nothing was written" in done.stderr
    assert path.read_text() == content and backups(path) == []
    assert not (home / ".claude.json").exists()  # the MCP entry waits for a good settings file too


def test_doctor_reports_the_hooks_and_a_missing_one(host) -> None:
    home, env, _ = host
    (home / ".claude").mkdir()
    assert bridge(env, "install", "claude-code").returncode == 0
    report = bridge(env, "doctor").stdout + bridge(env, "doctor").stderr
    assert f"hooks for claude-code ({home / '.claude' / 'settings.json'})" in report
    path = home / ".claude" / "settings.json"
    data = json.loads(path.read_text())
    del data["hooks"]["Stop"]
    path.write_text(json.dumps(data))
    done = bridge(env, "doctor")
    assert "claude-code hooks" in done.stdout + done.stderr and "no bridge hook for Stop" in done.stdout + done.stderr
