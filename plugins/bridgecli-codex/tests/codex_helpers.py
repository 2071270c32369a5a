"""Helpers shared by the codex plugin tests (a uniquely named module: several test dirs have a
conftest.py, so importing from \"conftest\" would be ambiguous)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridgecli_codex.client import Address, AppServer, Endpoint, Unreachable
from bridgecli_codex.launcher import group_alive, remove_socket


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true (tests wait on servers, never sleep blindly)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def write_config(xdg: Path, text: str) -> None:
    """Write ``bridge.toml`` for the isolated host."""
    path = xdg / "config" / "bridge" / "bridge.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def start_server(codex: Path, sock: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``codex app-server --listen unix://SOCK`` in its own session, once it answers."""
    log = open(sock.with_suffix(".log"), "wb")  # noqa: SIM115 - the child keeps writing to it
    proc = subprocess.Popen(
        [str(codex), "app-server", "--listen", f"unix://{sock}"],
        env=env,
        cwd=env["HOME"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    log.close()

    def answers() -> bool:
        assert proc.poll() is None, sock.with_suffix(".log").read_text(errors="replace")
        try:
            AppServer(Endpoint("unix", str(sock)), 5).close()
        except Unreachable:
            return False
        return True

    wait_for(answers, what=f"codex app-server on {sock}")
    return proc


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Kill the server's whole process group (node's wrapper and codex) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    wait_for(lambda: not group_alive(proc.pid), what="the app-server's processes to exit")
    remove_socket(Path(str(proc.args[-1]).removeprefix("unix://")))


def kill_servers_under(root: Path) -> None:
    """Kill every app-server whose socket lies under ``root`` (the ones a test's gateway
    spawned and a failed test left running), by process group id."""
    needle = f"unix://{root}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if needle in cmdline:
                os.killpg(os.getpgid(int(entry.name)), signal.SIGKILL)
                listen = next(arg for arg in cmdline.split(b"\0") if arg.startswith(needle))
                remove_socket(Path(listen.decode().removeprefix("unix://")))
        except (OSError, ProcessLookupError):
            continue


def new_thread(endpoint: Endpoint, **params: Any) -> str:
    """Start a thread on the server at ``endpoint``; its id."""
    with AppServer(endpoint, 30) as server:
        return str(server.call("thread/start", params)["thread"]["id"])


def turns(address: Address) -> list[dict[str, Any]]:
    """The thread's turns with all their items, oldest first, read back through the protocol."""
    with AppServer(address.endpoint, 30) as server:
        result = server.call(
            "thread/turns/list", {"threadId": address.thread_id, "itemsView": "full", "sortDirection": "asc"}
        )
    return list(result["data"])


def user_texts(turn: dict[str, Any]) -> list[tuple[str | None, str]]:
    """``(clientId, text)`` of each user message in ``turn``."""
    return [
        (item.get("clientId"), "".join(part.get("text", "") for part in item["content"]))
        for item in turn["items"]
        if item["type"] == "userMessage"
    ]
