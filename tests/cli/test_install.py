"""`bridge install` / `uninstall`: real files in a temp HOME, real `bridge` subprocesses."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path

import pytest

from tests.support.env import BRIDGE_BIN, run_bridge

ABS = str(Path(BRIDGE_BIN).absolute())


@pytest.fixture
def host(bridge_home, tmp_path):
    """A HOME with no client installed, a PATH without any client, and a project dir."""
    home = tmp_path / "home"
    home.mkdir()
    empty = tmp_path / "bin"
    empty.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    env = {**bridge_home.env, "HOME": str(home), "CODEX_HOME": str(home / "codex"), "PATH": str(empty)}
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    return home, env, project


def bridge(env, *args, cwd=None):
    if cwd is None:
        return run_bridge(*args, env=env)
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return run_bridge(*args, env=env)
    finally:
        os.chdir(old)


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bridge-backup-*"))


def test_install_then_again_changes_nothing_and_says_so(host):
    home, env, _ = host
    (home / ".claude").mkdir()
    done = bridge(env, "install", "claude-code")
    assert done.returncode == 0, done.stderr
    path = home / ".claude.json"
    assert f"added bridge's entry in {path}" in done.stdout
    assert json.loads(path.read_text()) == {"mcpServers": {"bridge": {"command": ABS, "args": ["mcp"]}}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    before = path.read_bytes()
    again = bridge(env, "install", "claude-code")
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stdout and "nothing to change" in again.stderr
    assert path.read_bytes() == before and backups(path) == []


def test_backup_made_other_keys_kept_and_user_keys_of_the_entry_kept(host):
    home, env, _ = host
    (home / ".claude").mkdir()
    path = home / ".claude.json"
    original = {
        "hasCompletedOnboarding": True,
        "projects": {"/x": {"hasTrustDialogAccepted": True}},
        "mcpServers": {
            "other": {"command": "/bin/other", "args": ["a"]},
            "bridge": {"command": "bridge", "args": ["mcp"], "env": {"BRIDGE_HOST_ID": "h1"}},
        },
    }
    path.write_text(json.dumps(original))
    path.chmod(0o640)
    done = bridge(env, "install", "claude-code", "--label", "main", "--role", "orchestrator")
    assert done.returncode == 0, done.stderr
    assert "updated" in done.stdout
    (backup,) = backups(path)
    assert json.loads(backup.read_text()) == original
    assert stat.S_IMODE(backup.stat().st_mode) == 0o640 == stat.S_IMODE(path.stat().st_mode)
    data = json.loads(path.read_text())
    assert data["projects"] == original["projects"] and data["hasCompletedOnboarding"] is True
    assert data["mcpServers"]["other"] == original["mcpServers"]["other"]
    assert data["mcpServers"]["bridge"] == {
        "command": ABS,
        "args": ["mcp", "--label", "main", "--role", "orchestrator"],
        "env": {"BRIDGE_HOST_ID": "h1"},
    }
    assert path.read_text().startswith('{\n  "hasCompletedOnboarding"')  # indent 2


def test_dry_run_prints_the_change_and_writes_nothing(host):
    home, env, _ = host
    (home / ".gemini").mkdir()
    done = bridge(env, "install", "gemini", "--dry-run")
    assert done.returncode == 0, done.stderr
    path = home / ".gemini" / "settings.json"
    assert f"would add bridge's entry in {path}" in done.stdout and ABS in done.stdout
    assert not path.exists()
    path.write_text('{"theme": "dark"}')
    as_json = bridge(env, "install", "gemini", "--dry-run", "--json")
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["dryRun"] is True
    assert report["clients"][0]["entry"] == {"command": ABS, "args": ["mcp"]}
    assert report["clients"][0]["action"] == "added"
    assert path.read_text() == '{"theme": "dark"}' and backups(path) == []


def test_uninstall_removes_only_bridges_entry(host):
    home, env, _ = host
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"mcpServers": {"other": {"command": "/bin/x"}}, "keep": [1, 2]}))
    assert bridge(env, "install", "cursor").returncode == 0
    assert set(json.loads(path.read_text())["mcpServers"]) == {"other", "bridge"}
    done = bridge(env, "uninstall", "cursor", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["clients"][0]["action"] == "removed"
    assert json.loads(path.read_text()) == {"mcpServers": {"other": {"command": "/bin/x"}}, "keep": [1, 2]}
    assert len(backups(path)) == 2
    again = bridge(env, "uninstall", "cursor")
    assert again.returncode == 0 and "unchanged — no bridge entry" in again.stdout


def test_codex_toml_keeps_every_other_table_and_key(host):
    home, env, _ = host
    path = home / "codex" / "config.toml"
    path.parent.mkdir()
    path.write_text('model = "o3"\n[profiles.fast]\nmodel = "o4-mini"\n[mcp_servers.other]\ncommand = "x"\nargs = []\n')
    done = bridge(env, "install", "codex")
    assert done.returncode == 0, done.stderr
    data = tomllib.loads(path.read_text())
    assert data["model"] == "o3" and data["profiles"] == {"fast": {"model": "o4-mini"}}
    assert data["mcp_servers"]["other"] == {"command": "x", "args": []}
    assert data["mcp_servers"]["bridge"] == {"command": ABS, "args": ["mcp"], "tool_timeout_sec": 900}
    assert bridge(env, "uninstall", "codex").returncode == 0
    assert "bridge" not in tomllib.loads(path.read_text())["mcp_servers"]


def test_codex_comments_and_layout_survive_install_and_uninstall(host):
    """Only bridge's tables are rewritten; an inline table we cannot cut is rendered afresh."""
    home, env, _ = host
    path = home / "codex" / "config.toml"
    path.parent.mkdir()
    mine = '# my codex\nmodel = "o3"  # fast one\n'
    path.write_text(
        f'{mine}\n[mcp_servers.bridge]\ncommand = "bridge"\n\n[mcp_servers.bridge.env]\nA = "1"\n\n'
        '# profiles\n[profiles.fast]\nmodel = "o4-mini"\n'
    )
    assert bridge(env, "install", "codex").returncode == 0
    text = path.read_text()
    assert text.startswith(mine) and '# profiles\n[profiles.fast]\nmodel = "o4-mini"\n' in text
    data = tomllib.loads(text)
    assert data["mcp_servers"]["bridge"] == {
        "command": ABS,
        "args": ["mcp"],
        "tool_timeout_sec": 900,
        "env": {"A": "1"},
    }
    assert bridge(env, "uninstall", "codex").returncode == 0
    text = path.read_text()
    assert (
        text.startswith(mine) and "bridge" not in text and tomllib.loads(text)["profiles"]["fast"]["model"] == "o4-mini"
    )
    path.write_text('mcp_servers = { bridge = { command = "x" }, other = { command = "y" } }\n')
    assert bridge(env, "install", "codex").returncode == 0
    assert tomllib.loads(path.read_text())["mcp_servers"] == {
        "bridge": {"command": ABS, "args": ["mcp"], "tool_timeout_sec": 900},
        "other": {"command": "y"},
    }


def test_opencode_entry_is_a_local_command_array(host):
    home, env, _ = host
    (home / ".config" / "opencode").mkdir(parents=True)
    assert bridge(env, "install", "opencode").returncode == 0
    data = json.loads((home / ".config" / "opencode" / "opencode.json").read_text())
    assert data == {"mcp": {"bridge": {"type": "local", "command": [ABS, "mcp"], "enabled": True}}}


def test_unknown_client_lists_the_known_ones_and_writes_nothing(host):
    home, env, _ = host
    (home / ".claude").mkdir()
    done = bridge(env, "install", "claude-code", "vscode")
    assert done.returncode == 6
    assert "unknown client 'vscode'" in done.stderr
    assert "claude-code, codex, opencode, gemini, cursor" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (home / ".claude.json").exists()


def test_a_client_not_installed_is_reported(host):
    home, env, _ = host
    done = bridge(env, "install", "opencode")
    assert done.returncode == 11
    assert "OpenCode (opencode) is not installed" in done.stderr and "install OpenCode first" in done.stderr
    assert not (home / ".config" / "opencode").exists()
    none = bridge(env, "install", "--all")
    assert none.returncode == 11 and "no agent client found" in none.stderr


#: each client's user file, relative to the test HOME (CODEX_HOME is HOME/codex)
USER_FILES = {
    "claude-code": ".claude.json",
    "codex": "codex/config.toml",
    "opencode": ".config/opencode/opencode.json",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/mcp.json",
}
#: a file of each format that does not parse, and the line its error is on
BROKEN_JSON = ('{\n  "a": 1,\n  oops\n}\n', "line 3")
BROKEN = {name: BROKEN_JSON for name in USER_FILES} | {"codex": ('model = "o3"\n[mcp_servers\n', "line 2")}
#: files that parse but hold something bridge must not edit, per format: (content, problem)
HOSTILE_JSON = [
    ("[1, 2]", "the top level is a list, not an object"),
    ('"bridge"', "the top level is a str, not an object"),
    ('{"TABLE": "bridge"}', "'TABLE' is a str, not an object"),
    ('{"TABLE": [{"bridge": 1}]}', "'TABLE' is a list, not an object"),
]
HOSTILE_TOML = [
    ('mcp_servers = "bridge"\n', "'mcp_servers' is a str, not an object"),
    ("mcp_servers = [1, 2]\n", "'mcp_servers' is a list, not an object"),
]
TABLES = {"claude-code": "mcpServers", "opencode": "mcp", "gemini": "mcpServers", "cursor": "mcpServers"}
HOSTILE = [(c, text, problem) for c in TABLES for text, problem in HOSTILE_JSON] + [
    ("codex", text, problem) for text, problem in HOSTILE_TOML
]


def refused_untouched(env, home, client, path, text, expected):
    """Both commands exit 3 naming ``path`` and ``expected``; the file and an older backup
    of it keep their bytes, and no new backup appears."""
    old_backup = path.with_name(path.name + ".bridge-backup-20200101-000000")
    old_backup.write_text("an earlier backup")
    for command in ("install", "uninstall"):
        done = bridge(env, command, client)
        assert done.returncode == 3, done.stderr
        assert str(path) in done.stderr and expected in done.stderr and "nothing was written" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert path.read_text() == text
    assert backups(path) == [old_backup] and old_backup.read_text() == "an earlier backup"


@pytest.mark.parametrize("client", list(USER_FILES))
def test_a_file_that_does_not_parse_is_refused_with_path_and_line(host, client):
    home, env, _ = host
    path = home / USER_FILES[client]
    path.parent.mkdir(parents=True, exist_ok=True)
    text, where = BROKEN[client]
    path.write_text(text)
    refused_untouched(env, home, client, path, text, where)


@pytest.mark.parametrize(("client", "content", "problem"), HOSTILE)
def test_hostile_files_are_refused_without_loss(host, client, content, problem):
    home, env, _ = host
    path = home / USER_FILES[client]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content.replace("TABLE", TABLES.get(client, "")))
    refused_untouched(env, home, client, path, path.read_text(), problem.replace("TABLE", TABLES.get(client, "")))


def test_one_broken_file_stops_every_client_before_any_is_written(host):
    home, env, _ = host
    (home / ".claude").mkdir()
    gemini = home / ".gemini" / "settings.json"
    gemini.parent.mkdir()
    gemini.write_text('{"mcpServers": {"bridge": ')
    done = bridge(env, "install", "claude-code", "gemini")
    assert done.returncode == 3 and str(gemini) in done.stderr, done.stderr
    assert not (home / ".claude.json").exists() and backups(gemini) == []


@pytest.mark.parametrize(
    ("client", "old", "kept"),
    [
        ("gemini", {"httpUrl": "http://127.0.0.1:9/mcp", "trust": True}, {"trust": True}),
        ("claude-code", {"type": "http", "url": "http://x/mcp", "headers": {"a": "b"}}, {}),
        ("opencode", {"type": "remote", "url": "http://x/mcp", "environment": {"A": "1"}}, {"environment": {"A": "1"}}),
    ],
)
def test_a_remote_bridge_entry_becomes_ours_and_loses_its_transport(host, client, old, kept):
    """A client prefers ``httpUrl``/``url`` to ``command`` (Gemini) or obeys ``type``
    (Claude Code, OpenCode): an old remote entry's transport keys would shadow ours."""
    home, env, _ = host
    path = home / USER_FILES[client]
    path.parent.mkdir(parents=True, exist_ok=True)
    (home / ".claude").mkdir()
    path.write_text(json.dumps({TABLES[client]: {"bridge": old}}))
    done = bridge(env, "install", client)
    assert done.returncode == 0, done.stderr
    entry = json.loads(path.read_text())[TABLES[client]]["bridge"]
    if client == "opencode":
        assert entry == {**kept, "type": "local", "command": [ABS, "mcp"], "enabled": True}
    else:
        assert entry == {**kept, "command": ABS, "args": ["mcp"]}


def test_a_symlink_is_followed_and_kept_a_dangling_one_refused(host, tmp_path):
    home, env, _ = host
    (home / ".claude").mkdir()
    target = tmp_path / "dotfiles" / "claude.json"
    target.parent.mkdir()
    target.write_text('{"keep": true}')
    link = home / ".claude.json"
    link.symlink_to(target)
    done = bridge(env, "install", "claude-code")
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and link.resolve() == target
    assert json.loads(target.read_text())["keep"] is True
    assert len(backups(target)) == 1
    link.unlink()
    link.symlink_to(tmp_path / "nowhere.json")
    dangling = bridge(env, "install", "claude-code")
    assert dangling.returncode == 3 and "does not exist" in dangling.stderr
    assert link.is_symlink() and not (tmp_path / "nowhere.json").exists()


def test_all_edits_every_client_found_and_only_those(host):
    home, env, _ = host
    (home / "codex").mkdir()
    (home / ".gemini").mkdir()
    done = bridge(env, "install", "--all", "--json")
    assert done.returncode == 0, done.stderr
    changed = {c["client"]: c for c in json.loads(done.stdout)["clients"]}
    assert set(changed) == {"codex", "gemini"}
    assert all(c["action"] == "added" for c in changed.values())
    assert tomllib.loads((home / "codex" / "config.toml").read_text())["mcp_servers"]["bridge"]["command"] == ABS
    assert json.loads((home / ".gemini" / "settings.json").read_text())["mcpServers"]["bridge"]["command"] == ABS
    assert not (home / ".claude.json").exists() and not (home / ".cursor").exists()
    again = json.loads(bridge(env, "install", "--all", "--json").stdout)
    assert [c["changed"] for c in again["clients"]] == [False, False]
    gone = json.loads(bridge(env, "uninstall", "--all", "--json").stdout)
    assert {c["action"] for c in gone["clients"]} == {"removed"}


def test_project_scope_writes_in_the_current_directory(host):
    home, env, project = host
    for name in (".claude", ".gemini", ".cursor"):
        (home / name).mkdir()
    (home / ".config" / "opencode").mkdir(parents=True)
    done = bridge(env, "install", "--all", "--scope", "project", cwd=project)
    assert done.returncode == 0, done.stderr
    for rel, key in [
        (".mcp.json", "mcpServers"),
        ("opencode.json", "mcp"),
        (".gemini/settings.json", "mcpServers"),
        (".cursor/mcp.json", "mcpServers"),
    ]:
        entry = json.loads((project / rel).read_text())[key]["bridge"]
        assert ABS in (entry.get("command"), entry.get("command", [None])[0]), rel
    assert not (home / ".claude.json").exists()
    (home / "codex").mkdir()
    codex = bridge(env, "install", "codex", "--scope", "project", cwd=project)
    assert codex.returncode == 2 and "codex has no project file" in codex.stderr and "--scope user" in codex.stderr


def test_doctor_lists_configured_clients_and_warns_on_a_foreign_bridge(host, monkeypatch):
    from bridgecli import doctor

    home, env, _ = host
    for key in ("HOME", "CODEX_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(key, env[key])
    (home / ".claude").mkdir()
    assert doctor.check_clients().status == doctor.OK
    assert bridge(env, "install", "claude-code").returncode == 0
    ok = doctor.check_clients()
    assert ok.status == doctor.OK and "claude-code" in ok.detail
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"mcpServers": {"bridge": {"command": "/usr/sbin/bridge", "args": ["mcp"]}}}))
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"bridge": {"command": "bridge"}}}))
    warn = doctor.check_clients()
    assert warn.status == doctor.WARN
    assert "/usr/sbin/bridge" in warn.detail and "from PATH" in warn.detail and "bridge install" in (warn.fix or "")
