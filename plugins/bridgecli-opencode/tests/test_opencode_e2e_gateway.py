"""End to end through real gateways on the session's RabbitMQ: host a spawns an OpenCode
agent (kind ``opencode``, with a first prompt) on host b with the ``opencode`` launcher,
sends it a message, and b's gateway posts it into the real OpenCode session; a's
``bridge track`` shows the stored message's id."""

from __future__ import annotations

from pathlib import Path

import pytest
from oc_helpers import opencode_bin, opencode_env, user_texts, wait_for

from bridgecli_opencode.client import Address, Client

pytestmark = pytest.mark.slow


def _states(host, msg_id: str) -> dict:
    return host.bridge_json("track", msg_id)["states"]


def test_spawn_send_track_stop(host_factory) -> None:
    a = host_factory("a", extra_env={"BRIDGE_ROSTER_INTERVAL": "0.5"})
    b = host_factory("b", extra_env={"BRIDGE_ROSTER_INTERVAL": "0.5"})
    project = b.root / "project"
    project.mkdir()
    env = {k: v for k, v in opencode_env(b.root / "oc").items() if k.startswith(("HOME", "OPENCODE_", "ANTHROPIC"))}
    env_toml = ", ".join(f'{k} = "{v}"' for k, v in env.items())
    b.write_config(f"""
[profiles.oc]
agent = "opencode"
launcher = "opencode"
command = ["{opencode_bin()}"]
cwd = "{project}"
ready_timeout = 90
env = {{ {env_toml} }}
""")
    main = a.register("main", role="main")
    b.start_gateway(), a.start_gateway()
    # a spawn goes to a gateway a's roster has heard: wait for b's announcement
    wait_for(lambda: b.name in [g["host"] for g in a.bridge_json("roster")["gateways"]], what=f"{b.name} in a's roster")

    first = "start by reading the README"
    spawned = a.bridge_json("spawn", "oc", "-H", b.name, "-l", "oc1", "--prompt", first, "--from", "main", timeout=120)
    deliver = spawned["deliver"]
    assert deliver.startswith("opencode:http://127.0.0.1:")
    url, session = deliver.removeprefix("opencode:").split("#")
    password_file = Path(b.env["XDG_STATE_HOME"]) / "bridge" / "spawn" / "oc1" / "opencode-password"
    client = Client(
        Address("http", "127.0.0.1", int(url.rsplit(":", 1)[1]), session), password_file.read_text().strip()
    )
    try:
        sent = a.bridge_json("send", "oc1", "please review PR 7", "--from", "main")
        marker = f"[bridge {sent['msgId'][:8]}]"
        a.bridge("track", sent["msgId"], "--wait", "read", "--timeout", "60s", check=True)
        states = _states(a, sent["msgId"])
        ref = states["delivered"]["ref"]
        assert states["delivered"]["how"] == "accepted" and states["read"]["ref"] == ref
        stored = user_texts(client.request("GET", f"/session/{session}/message")[1])
        assert list(stored) == [list(stored)[0], ref] and stored[list(stored)[0]] == first  # the kind's prompt form
        assert stored[ref].startswith(f"{marker} SEND from main (gid {main}) on {a.name}")
        assert "│ please review PR 7" in stored[ref]
    finally:
        a.bridge("stop", "oc1", check=True)
    wait_for(lambda: not password_file.exists(), what="the spawn's password file to go")
    with pytest.raises(Exception, match="nothing answers"):
        client.request("GET", "/session")
