"""Helpers shared by the OpenCode plugin tests: a real ``opencode serve`` in an isolated
HOME, offline with a made-up key (a uniquely named module: several test dirs have a
conftest.py, so importing from "conftest" would be ambiguous)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridgecli.envelope import Envelope
from bridgecli.interfaces import Entity, LaunchHandle, LaunchSpec
from bridgecli_opencode.client import Address, Client
from tests.support import agent_clis


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something true, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def opencode_env(root: Path) -> dict[str, str]:
    """The environment of an OpenCode that keeps all its files under ``root`` and starts
    offline (no model list, update or plugin fetches); model calls fail, prompts are stored."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "OPENCODE_", "BRIDGE_"))}
    for name in ("config", "data", "state", "cache"):
        (root / name).mkdir(parents=True, exist_ok=True)
        env[f"XDG_{name.upper()}_HOME"] = str(root / name)
    (root / "home").mkdir(exist_ok=True)
    env.update(HOME=str(root / "home"), ANTHROPIC_API_KEY="sk-test-made-up")
    env.update(dict.fromkeys(agent_clis.OPENCODE_OFFLINE, "1"))
    return env


def opencode_bin() -> str:
    """The real OpenCode program (installed from npm once; a failed install fails the test)."""
    return str(agent_clis.install("opencode") / "opencode")


class Server:
    """A real ``opencode serve`` on 127.0.0.1 with a password, in its own process group."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.password = uuid.uuid4().hex
        self.password_file = root / "password"
        self.password_file.write_text(self.password + "\n")
        self.password_file.chmod(0o600)
        (root / "project").mkdir(parents=True, exist_ok=True)
        env = {**opencode_env(root), "OPENCODE_SERVER_PASSWORD": self.password}
        self.log = root / "serve.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [opencode_bin(), "serve", "--hostname", "127.0.0.1", "--port", "0"],
                cwd=root / "project",
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        found = wait_for(self._listening, timeout=60, what="opencode serve to listen")
        self.url = found.group(1)
        self.port = int(found.group(2))

    def _listening(self) -> re.Match[str] | None:
        assert self.proc.poll() is None, f"opencode serve exited: {self.log.read_text()}"
        return re.search(r"listening on (http://127\.0\.0\.1:(\d+))", self.log.read_text())

    def client(self, session: str = "ses_x") -> Client:
        return Client(Address("http", "127.0.0.1", self.port, session), self.password)

    def new_session(self) -> str:
        return str(self.client().request("POST", "/session", {"title": "test"})[1]["id"])

    def messages(self, session: str) -> list[dict[str, Any]]:
        return list(self.client().request("GET", f"/session/{session}/message")[1])

    def entity(self, session: str, label: str = "oc") -> Entity:
        """An entity delivered to ``session``, with the password file in its launch data."""
        return Entity(
            gid=str(uuid.uuid4()),
            label=label,
            role="agent",
            deliver=f"opencode:{self.url}#{session}",
            host="test",
            created=time.time(),
            launch_data={"password_file": str(self.password_file)},
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def user_texts(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Stored user messages: id -> their text parts joined."""
    return {
        m["info"]["id"]: "\n".join(p.get("text", "") for p in m["parts"] if p.get("type") == "text")
        for m in messages
        if m["info"]["role"] == "user"
    }


def envelope(content: str, sender: str | None = None) -> Envelope:
    gid = sender or str(uuid.uuid4())
    return Envelope(kind="SEND", sender=gid, recipient=gid, content=content, sender_label="lead")


def dump(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, indent=1)[:3000]


def launch_spec(root: Path, command: list[str], label: str = "oc1") -> LaunchSpec:
    """What the gateway would pass the launcher for profile ``oc`` running ``command``."""
    gid = str(uuid.uuid4())
    log_dir = root / "spawn" / label
    log_dir.mkdir(parents=True, mode=0o700)
    (root / "project").mkdir(exist_ok=True)
    return LaunchSpec(
        gid=gid,
        label=label,
        role="agent",
        profile_name="oc",
        command=command,
        cwd=str(root / "project"),
        env={**opencode_env(root / "oc"), "BRIDGE_GID": gid, "BRIDGE_HOST_ID": "test"},
        profile={"launcher": "opencode", "ready_timeout": 60},
        log_dir=log_dir,
    )


def launched_entity(handle: LaunchHandle) -> Entity:
    """The entity the gateway registers for ``handle``, launch data included."""
    return Entity(
        gid=str(uuid.uuid4()),
        label="oc1",
        role="agent",
        deliver=handle.deliver,
        host="test",
        created=time.time(),
        launcher="opencode",
        launch_data=dict(handle.data),
    )
