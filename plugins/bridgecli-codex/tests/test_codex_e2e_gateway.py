"""The codex plugin end to end through real gateways on the session's RabbitMQ: a main on
host a spawns Codex on host b, its message becomes input of b's Codex thread and its receipts
name that turn; a server that died dead-letters the message with the reason."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from codex_helpers import kill_servers_under, stop_server, turns, user_texts, wait_for

from bridgecli_codex.client import parse_address
from bridgecli_codex.launcher import group_alive

pytestmark = pytest.mark.slow


@pytest.fixture
def codex_host(host_factory, codex_bin: Path, codex_env: dict[str, str]):
    """Host b with a profile ``cx`` that spawns codex through this plugin's launcher; every
    app-server its gateway started is killed in teardown."""
    b = host_factory("b", extra_env={"BRIDGE_ROSTER_INTERVAL": "0.5"})
    env = ", ".join(f'{key} = "{value}"' for key, value in codex_env.items())
    b.write_config(f"""
[profiles.cx]
agent = "codex"
launcher = "codex"
command = ["{codex_bin}"]
cwd = "{codex_env["HOME"]}"
env = {{ {env} }}
""")
    yield b
    kill_servers_under(b.root)


def test_spawned_codex_gets_a_message_as_turn_input(host_factory, codex_host) -> None:
    b = codex_host
    a = host_factory("a", extra_env={"BRIDGE_ROSTER_INTERVAL": "0.5"})
    a.register("main", role="main")
    b.start_gateway(), a.start_gateway()

    def live_on_a() -> set[str]:
        return {g["host"] for g in a.bridge_json("roster").get("gateways", [])}

    wait_for(lambda: b.name in live_on_a(), what=f"{b.name}'s gateway in a's roster")
    first = f"first-{uuid.uuid4().hex[:8]}"
    spawned = a.bridge_json("spawn", "cx", "-H", b.name, "-l", "cx1", "--prompt", first, timeout=120)
    assert spawned["deliver"].startswith("codex:unix:") and spawned["launcher"] == "codex"
    address = parse_address(spawned["deliver"].removeprefix("codex:"))

    sent = a.bridge_json("send", "cx1", "please review PR 7", "--from", "main")

    def messages() -> list[tuple[str | None, str]]:
        return [message for turn in turns(address) for message in user_texts(turn)]

    wait_for(lambda: any(client == sent["msgId"] for client, _ in messages()), what="the message in the thread")
    (prompt, message) = messages()
    assert prompt[1] == first  # the spawn's prompt came first, then the message
    assert message[1].startswith(f"[bridge {sent['msgId'][:8]}] SEND from main")
    assert "│ please review PR 7" in message[1]
    assert b.log().count("delivery failed") == 0, b.log()
    # the sender's receipts carry codex's own id of the turn that holds the message
    states = a.bridge_json("track", sent["msgId"], "--wait", "read", "--timeout", "30s")["states"]
    (turn_id,) = [t["id"] for t in turns(address) if sent["msgId"] in (c for c, _ in user_texts(t))]
    assert (states["delivered"]["how"], states["delivered"]["ref"]) == ("accepted", turn_id)
    assert (states["read"]["how"], states["read"]["ref"]) == ("turn", turn_id)

    a.bridge("stop", "cx1", check=True)
    wait_for(lambda: not Path(address.endpoint.target).exists(), what="the server's socket to go")


def test_a_dead_server_is_retried_then_dead_lettered(host_factory, app_server) -> None:
    b = host_factory("b", extra_env={"BRIDGE_ROSTER_INTERVAL": "0.5"})
    b.write_config("[messaging]\nmax_attempts = 3\n")
    a = host_factory("a")
    a.register("main", role="main")
    running = app_server()
    worker = b.register("worker", deliver=f"codex:{running.address}")
    a.start_gateway(), b.start_gateway()
    stop_server(running.proc)
    assert not group_alive(running.proc.pid)
    sent = a.bridge_json("send", worker, "anyone there?", "--from", "main")

    def dead() -> dict | None:
        rows = b.bridge_json("dlq", "list", "--limit", "10000")["dead_letters"]
        return next((row for row in rows if row["id"] == sent["msgId"]), None)

    wait_for(dead, what="the message in bridge.dlq")
    row = dead()
    assert row is not None and row["reason"] == "delivery_failed"
    assert f"codex app-server at unix:{running.address.endpoint.target} is gone" in row["detail"]
    assert int(row["attempts"]) == 3  # retried up to messaging.max_attempts, not dropped at once

    def roster_status() -> str | None:
        entries = b.bridge_json("roster", "--host", b.name)["entries"]
        return next((e["status"] for e in entries if e["gid"] == worker), None)

    wait_for(lambda: roster_status() == "gone", what="the roster to mark the worker gone")
