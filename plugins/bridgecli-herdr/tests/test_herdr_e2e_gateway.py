"""U1 through the real gateway with the worker in a (fake) herdr pane, and a blocked agent
that the gateway waits for instead of typing into its dialog."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fake_herdr import FakeHerdr


def _wait_for(predicate, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def herdr_host(host_factory, short_tmp: Path):
    fake = FakeHerdr(short_tmp / "herdr.sock").start()
    b = host_factory("b", extra_env={"HERDR_SOCKET_PATH": str(fake.path)})
    yield b, fake
    fake.stop()


def test_u1_worker_in_a_herdr_pane(host_factory, herdr_host) -> None:
    b, fake = herdr_host
    pane = fake.add_pane(agent="claude", name="worker")
    a = host_factory("a")
    main = a.register("main", role="main")
    worker = b.register("worker", deliver=f"herdr:{pane.pane_id}")
    a.start_gateway(), b.start_gateway()
    sent = a.bridge_json("send", worker, "review PR 9", "--from", "main")
    prompt = _wait_for(lambda: pane.prompts and pane.prompts[0], what="the prompt in the pane")
    assert prompt.startswith(f"[bridge {sent['msgId'][:8]}] SEND from main")
    assert f'answer with: bridge reply {sent["msgId"]} "..."' in prompt and "│ review PR 9" in prompt
    b.bridge("reply", sent["msgId"], "LGTM", env={"BRIDGE_GID": worker}, check=True)
    back = a.bridge_json("poll", "--as", main, "--wait", "30s")["messages"]
    assert [(m["kind"], m["content"], m["inReplyTo"]) for m in back] == [("REPLY", "LGTM", sent["msgId"])]


def test_blocked_agent_gets_the_message_only_after_its_dialog(host_factory, herdr_host) -> None:
    b, fake = herdr_host
    b.write_config("[plugins.herdr]\nblocked_wait = 1\n")
    pane = fake.add_pane(agent="claude", status="blocked")
    a = host_factory("a")
    a.register("main", role="main")
    worker = b.register("worker", deliver=f"herdr:{pane.pane_id}")
    a.start_gateway(), b.start_gateway()
    a.bridge_json("send", worker, "are you there?", "--from", "main")
    _wait_for(lambda: "blocked on an approval dialog" in b.log(), what="a retryable blocked failure")
    assert fake.pane_bytes(pane.pane_id) == b""  # the dialog got nothing
    fake.set_status(pane.pane_id, "idle")
    _wait_for(lambda: pane.prompts, what="delivery after the dialog closed")
    assert "│ are you there?" in pane.prompts[0] and len(pane.prompts) == 1
