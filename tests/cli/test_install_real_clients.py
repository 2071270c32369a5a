"""The entries `bridge install` writes, read by the real Claude Code, OpenCode, Codex and Gemini.

Claude Code's, OpenCode's and Gemini's `mcp list` start every configured server and do the
MCP handshake, so a passing test means the client found the entry in the file bridge wrote
and ran this bridge; Codex's only reads its file, so it is asked for the command line. PATH
puts iproute2's `bridge` (/usr/sbin) before everything but the clients: only an entry that
names this bridge by absolute path connects. The CLIs come from npm into `.venv/agent-clis`
(tests/support/agent_clis.py); a failed npm install fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from bridgecli.errors import ExitCode
from tests.support import agent_clis
from tests.support.chromium import free_port
from tests.support.env import BRIDGE_BIN, make_home

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ABS = str(Path(BRIDGE_BIN).absolute())

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def agent_bin() -> Path:
    """The directory holding the real `claude`, `opencode`, `codex` and `gemini`."""
    return agent_clis.install(*agent_clis.PACKAGES)


@dataclass
class Clients:
    """A HOME in which every client starts offline, its environment and a project dir."""

    env: dict[str, str]
    home: Path
    project: Path

    def run(self, *command: str, cwd: Path | None = None) -> str:
        """What ``command`` printed (stdout and stderr, colours removed), run in the project."""
        done = subprocess.run(
            list(command),
            env=self.env,
            cwd=cwd or self.project,
            capture_output=True,
            text=True,
            timeout=150,
            stdin=subprocess.DEVNULL,
        )
        return ANSI.sub("", done.stdout + done.stderr)

    def bridge(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [BRIDGE_BIN, *args],
            env=self.env,
            cwd=self.project,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )


def make_clients(root: Path, agent_bin: Path, bridge_env: dict[str, str]) -> Clients:
    """Clients in ``root/home`` for the bridge host of ``bridge_env``, each `bridge mcp`
    electing its browser broker on a port of the test's own."""
    home, project = root / "home", root / "project"
    project.mkdir(parents=True)
    agent_clis.claude_home(home, project)
    for config in (".config/opencode", ".codex", ".gemini"):
        (home / config).mkdir(parents=True)
    env = {**bridge_env, **agent_clis.client_env(home, agent_bin), "BRIDGE_BROWSER_PORT": str(free_port())}
    env["PATH"] = f"{agent_bin}{os.pathsep}/usr/sbin{os.pathsep}/sbin{os.pathsep}" + env["PATH"].split(os.pathsep, 1)[1]
    found = shutil.which("bridge", path=env["PATH"])
    assert found is None or found == "/usr/sbin/bridge", found  # never this installation's
    return Clients(env, home, project)


@pytest.fixture
def clients(agent_bin) -> Iterator[Clients]:
    """Clients on a host where no gateway runs (nor is configured)."""
    root = Path(tempfile.mkdtemp(prefix="ic", dir="/tmp"))
    bridge_env = make_home(root / "xdg").env
    yield make_clients(root, agent_bin, bridge_env)
    shutil.rmtree(root, ignore_errors=True)


#: client -> (its list command, a pattern of its line for a connected bridge, its line for none)
LISTS = {
    "claude-code": (
        ("claude", "mcp", "list"),
        rf"^bridge: {re.escape(ABS)} mcp - ✔ Connected$",
        "No MCP servers configured",
    ),
    "opencode": (
        ("opencode", "mcp", "list"),
        rf"✓ bridge\s+connected\s*\n\W*{re.escape(ABS)} mcp$",
        "No MCP servers configured",
    ),
}


@pytest.mark.parametrize("client", list(LISTS))
def test_connects_with_no_gateway_and_uninstall_removes_it(clients, client):
    """`bridge mcp` completes the handshake on a host without a gateway (its tools then
    say so), and the client shows it connected; after uninstall it is gone."""
    command, connected, none = LISTS[client]
    status = clients.bridge("status")
    assert status.returncode == ExitCode.GATEWAY_UNAVAILABLE, status.stderr
    assert "no gateway is listening" in status.stderr
    assert clients.bridge("install", client).returncode == 0
    text = clients.run(*command)
    assert re.search(connected, text, re.M), text
    done = clients.bridge("uninstall", client)
    assert done.returncode == 0 and "removed bridge's entry" in done.stdout, done.stderr
    text = clients.run(*command)
    assert none in text and "bridge" not in text, text


async def _list_beside_a_session(clients: Clients, command: tuple[str, ...]) -> tuple[str, list[dict]]:
    """Run ``command`` while one `bridge mcp` session (an SDK stdio client in the same
    project, so the same label) is attached to the gateway; then call a tool in that session."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    server = StdioServerParameters(command=BRIDGE_BIN, args=["mcp"], env=clients.env, cwd=clients.project)
    with open(clients.project.parent / "first-session.log", "a") as log:
        async with stdio_client(server, errlog=log) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            with anyio.fail_after(60):
                while True:  # attached in the background: wait until the gateway has the entity
                    listed = await anyio.to_thread.run_sync(clients.bridge, "entities", "--json")
                    if listed.returncode == 0 and (entities := json.loads(listed.stdout)["entities"]):
                        break
                    await anyio.sleep(0.2)
            text = await anyio.to_thread.run_sync(lambda: clients.run(*command))
            roster = await session.call_tool("bridge_roster", {})
            assert not roster.is_error, roster
            return text, entities


@pytest.mark.parametrize("client", list(LISTS))
def test_connects_while_another_session_uses_bridge(host_factory, agent_bin, client, tmp_path):
    """A second `bridge mcp` on a host whose gateway already serves one (same label, same
    browser port) still connects, and the first session keeps working."""
    host = host_factory("ic")
    host.start_gateway(timeout=90)
    clients = make_clients(tmp_path, agent_bin, host.env)
    assert clients.bridge("install", client).returncode == 0
    command, connected, _ = LISTS[client]
    text, entities = anyio.run(_list_beside_a_session, clients, command)
    assert re.search(connected, text, re.M), text
    assert [e["role"] for e in entities] == ["main"], entities


def test_codex_lists_the_entry_with_the_absolute_path(clients):
    config = clients.home / ".codex" / "config.toml"
    config.write_text('# mine\nmodel = "o3"\n')
    assert clients.bridge("install", "codex").returncode == 0
    assert config.read_text().startswith('# mine\nmodel = "o3"\n')
    table = clients.run("codex", "mcp", "list")
    assert re.search(rf"^bridge\s+{re.escape(ABS)}\s+mcp\s+-\s+-\s+enabled\b", table, re.M), table
    listed = subprocess.run(
        ["codex", "mcp", "list", "--json"], env=clients.env, cwd=clients.project, capture_output=True, text=True
    )
    (entry,) = json.loads(listed.stdout)
    assert entry["name"] == "bridge" and entry["enabled"] is True
    assert entry["transport"]["command"] == ABS and entry["transport"]["args"] == ["mcp"]
    assert entry["tool_timeout_sec"] == 900  # read by Codex, not only written by us
    assert clients.bridge("uninstall", "codex").returncode == 0
    assert "No MCP servers configured yet" in clients.run("codex", "mcp", "list")


def test_gemini_reads_the_settings_and_connects_in_a_trusted_folder(clients):
    """Untrusted (the default) it lists bridge as disabled; trusted through
    ~/.gemini/trustedFolders.json (docs/cli/trusted-folders.md) it connects."""
    assert clients.bridge("install", "gemini").returncode == 0
    untrusted = clients.run("gemini", "mcp", "list")
    assert "Error in" not in untrusted and "Please fix" not in untrusted, untrusted
    assert re.search(rf"^○ bridge: {re.escape(ABS)} mcp \(stdio\) - Disabled$", untrusted, re.M), untrusted
    trusted_folders = {str(clients.project): "TRUST_FOLDER"}
    (clients.home / ".gemini" / "trustedFolders.json").write_text(json.dumps(trusted_folders))
    trusted = clients.run("gemini", "mcp", "list")
    assert re.search(rf"^✓ bridge: {re.escape(ABS)} mcp \(stdio\) - Connected$", trusted, re.M), trusted
    assert clients.bridge("uninstall", "gemini").returncode == 0
    gone = clients.run("gemini", "mcp", "list")
    assert "No MCP servers configured" in gone and "bridge" not in gone, gone


def test_project_scope_is_read_by_claude_code_and_opencode(clients):
    done = clients.bridge("install", "claude-code", "opencode", "--scope", "project", "--label", "proj")
    assert done.returncode == 0, done.stderr
    assert (clients.project / ".mcp.json").exists() and (clients.project / "opencode.json").exists()
    opencode = clients.run("opencode", "mcp", "list")
    assert re.search(r"✓ bridge\s+connected", opencode), opencode
    claude = clients.run("claude", "mcp", "list")
    # a project's .mcp.json needs the user's approval before Claude Code runs it
    assert "bridge" in claude and "--label proj" in claude, claude
