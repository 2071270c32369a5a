"""Helpers shared by the tmux plugin tests (a uniquely named module: several test dirs
have a conftest.py, so importing from \"conftest\" would be ambiguous)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def wait_for(predicate: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true (tests wait on terminals, never sleep blindly)."""
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


def agent_tmux_server(host, sock: str, agent_env: dict[str, str]):
    """Start a tmux server on ``sock`` for ``host`` (a test host) whose programs see
    ``agent_env`` (an agent CLI's offline environment) over the host's own XDG_/BRIDGE_
    settings; returns (its Tmux, the environment, its pid) for ``stop_server``. The server's
    environment is what a spawned program inherits; tmux looks the command up on the PATH of
    the client that opens the window: the gateway's."""
    import subprocess

    from bridgecli_tmux.client import Tmux
    from tests.support.tmux import server_pid

    env = {k: v for k, v in host.env.items() if not k.startswith("TMUX")}
    env.update(agent_env)
    env.update({k: v for k, v in host.env.items() if k.startswith(("XDG_", "BRIDGE_"))})
    subprocess.run(
        ["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "bridge", "-x", "200", "-y", "50"],
        check=True,
        env=env,
    )
    return Tmux(sock), env, server_pid(sock)


def spawn_with_prompt_then_send(a, b, profile: str, label: str, spawn_timeout: float):
    """From host ``a`` (with an entity ``main``), spawn ``profile`` on host ``b`` as ``label``
    with a first prompt, then send it a message the moment the spawn returns, as a user would;
    returns (its pane, the message's header marker, the prompt, the message's word)."""
    import uuid

    first = f"first-{uuid.uuid4().hex[:8]}"
    word = f"ping-{uuid.uuid4().hex[:8]}"
    handle = a.bridge_json("spawn", profile, "-H", b.name, "-l", label, "--prompt", first, timeout=spawn_timeout)
    sent = a.bridge_json("send", label, word, "--from", "main")
    return handle["deliver"].removeprefix("tmux:"), f"[bridge {sent['msgId'][:8]}]", first, word
