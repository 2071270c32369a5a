"""The herdr delivery backend against the fake herdr server."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from fake_herdr import PASTE_END, PASTE_START, FakeHerdr

from bridgecli.envelope import Envelope
from bridgecli.errors import BridgeError, DeliveryError
from bridgecli.interfaces import Entity
from bridgecli.sanitize import is_inert, sanitize

SENDER = "0b5e0000-aaaa-4bbb-8ccc-dddddddddddd"


def entity(pane_id: str) -> Entity:
    return Entity(
        gid=str(uuid.uuid4()), label="w", role="agent", deliver=f"herdr:{pane_id}", host="test", created=time.time()
    )


def message(content: str, kind: str = "SEND") -> Envelope:
    return Envelope(kind=kind, sender=SENDER, recipient=SENDER, content=content, sender_label="lead")


def written(herdr: FakeHerdr, pane_id: str) -> str:
    return herdr.pane_bytes(pane_id).decode("utf-8")


def test_inject_into_an_agent_and_read_back(make_backend, herdr: FakeHerdr) -> None:
    backend = make_backend()
    pane = herdr.add_pane(agent="claude")
    env = message("please review\nthe diff", kind="ASK")
    backend.deliver(entity(pane.pane_id), env)
    assert len(pane.prompts) == 1  # one submission holding the whole frame
    prompt = pane.prompts[0].split("\n")
    assert prompt[0].startswith(f"[bridge {env.msg_id[:8]}] ASK from lead")
    assert prompt[1] == f'answer with: bridge answer {env.msg_id} "..."'
    assert prompt[2:4] == ["│ please review", "│ the diff"]
    sent = [r for r in herdr.requests if r["method"] == "pane.send_input"]
    assert sent[0]["params"]["keys"] == ["Enter"] and "\r" not in sent[0]["params"]["text"]
    assert written(herdr, pane.pane_id).startswith(PASTE_START)


def test_shell_pane_gets_comment_lines(make_backend, herdr: FakeHerdr) -> None:
    backend = make_backend()
    pane = herdr.add_pane()  # no agent: a plain shell
    backend.deliver(entity(pane.pane_id), message("rm -rf ~\n$(reboot)"))
    assert pane.commands == []  # every submitted line was a comment


HOSTILE = [
    "\x1b[201~\ntouch /tmp/PWNED\n",
    "\x1b[201~\rtouch /tmp/PWNED\r",
    "x\x03\x03touch /tmp/PWNED\r",
    "\x1b]52;c;dG91Y2gK\x07\x9b201~\rtouch /tmp/PWNED\r",
]


@pytest.mark.parametrize("payload", HOSTILE)
@pytest.mark.parametrize("agent", [None, "claude"])
def test_hostile_payloads_stay_inside_the_paste(make_backend, herdr: FakeHerdr, payload: str, agent) -> None:
    backend = make_backend()
    pane = herdr.add_pane(agent=agent)
    backend.deliver(entity(pane.pane_id), message(payload))
    data = written(herdr, pane.pane_id)
    # exactly the paste herdr wrapped, then Enter: nothing can end it early
    assert data.count(PASTE_END) == 1 and data.endswith(PASTE_END + "\r")
    assert is_inert(data[len(PASTE_START) : -len(PASTE_END + "\r")])
    assert pane.commands == [] and pane.agent == agent  # nothing ran; Ctrl-C did not kill the agent
    assert len(pane.prompts) == (1 if agent else 0)
    screen = herdr.m_pane_read({"pane_id": pane.pane_id})["read"]["text"]
    for line in filter(None, sanitize(payload).split("\n")):
        assert "│ " + line in screen  # shown as inert text


def test_the_hostile_test_can_fail(make_backend, herdr: FakeHerdr, monkeypatch) -> None:
    """Control: unsanitised, the same payload escapes the paste and runs in the fake shell."""
    import bridgecli.framing as framing

    monkeypatch.setattr(framing, "sanitize", lambda text: text)
    backend = make_backend()
    pane = herdr.add_pane()
    with pytest.raises(DeliveryError):  # the pane closes under it ("exit" ran)
        backend.deliver(entity(pane.pane_id), message("\x1b[201~\rtouch /tmp/PWNED\rexit\r"))
    assert pane.commands == ["touch /tmp/PWNED", "exit"]


def test_long_content_is_cut(make_backend, herdr: FakeHerdr) -> None:
    backend = make_backend(max_inline_bytes=100)
    pane = herdr.add_pane(agent="codex")
    env = message("y" * 250)
    backend.deliver(entity(pane.pane_id), env)
    assert f"[cut: 150 more bytes — read all of it with: bridge show {env.msg_id}]" in pane.prompts[0]


def test_blocked_agent_is_never_typed_into(make_backend, herdr: FakeHerdr) -> None:
    backend = make_backend(blocked_wait=0.6)
    pane = herdr.add_pane(agent="claude", status="blocked")
    started = time.monotonic()
    with pytest.raises(DeliveryError) as info:
        backend.deliver(entity(pane.pane_id), message("hi"))
    assert info.value.retryable is True and "blocked on an approval dialog" in str(info.value)
    assert 0.5 < time.monotonic() - started < 10  # waited blocked_wait, then gave up
    assert written(herdr, pane.pane_id) == ""
    assert not any(r["method"].startswith(("pane.send", "agent.prompt")) for r in herdr.requests)


def test_blocked_then_unblocked_is_delivered_after(make_backend, herdr: FakeHerdr) -> None:
    backend = make_backend(blocked_wait=10)
    pane = herdr.add_pane(agent="claude", status="blocked")
    typed_while_blocked: list[str] = []

    def unblock() -> None:
        typed_while_blocked.append(written(herdr, pane.pane_id))
        herdr.set_status(pane.pane_id, "idle")

    threading.Timer(0.4, unblock).start()
    backend.deliver(entity(pane.pane_id), message("after the dialog"))
    assert typed_while_blocked == [""]
    assert len(pane.prompts) == 1 and "│ after the dialog" in pane.prompts[0]


def test_prompt_method_on_herdr_09(make_backend, herdr: FakeHerdr) -> None:
    herdr.protocol, herdr.version = 22, "0.9.0"
    backend = make_backend(method="prompt")
    pane = herdr.add_pane(agent="pi")
    env = message("via agent.prompt")
    backend.deliver(entity(pane.pane_id), env)
    assert any(r["method"] == "agent.prompt" for r in herdr.requests)
    assert pane.prompts and pane.prompts[0].startswith(f"[bridge {env.msg_id[:8]}]")


def test_agent_blocked_race_on_herdr_09(make_backend, herdr: FakeHerdr, monkeypatch) -> None:
    """The agent becomes blocked between our check and the prompt: herdr 0.9 refuses
    atomically (agent_blocked) and the failure is retryable, with nothing typed."""
    herdr.protocol, herdr.version = 22, "0.9.0"
    backend = make_backend(method="prompt")
    pane = herdr.add_pane(agent="pi", status="blocked")
    monkeypatch.setattr(backend, "_wait_unblocked", lambda pane_id: backend._pane(pane_id))
    with pytest.raises(DeliveryError) as info:
        backend.deliver(entity(pane.pane_id), message("hi"))
    assert info.value.retryable is True and "herdr refused the prompt" in str(info.value)
    assert written(herdr, pane.pane_id) == ""


def test_prompt_method_on_herdr_08_confirms_after_delayed_enter(make_backend, herdr: FakeHerdr) -> None:
    backend = make_backend(method="prompt")
    pane = herdr.add_pane(agent="claude")
    backend.deliver(entity(pane.pane_id), message("delayed"))
    assert any(r["method"] == "agent.prompt" for r in herdr.requests)


def test_pane_closed_mid_delivery(make_backend, herdr: FakeHerdr) -> None:
    backend = make_backend(blocked_wait=10)
    pane = herdr.add_pane(agent="claude", status="blocked")
    threading.Timer(0.3, lambda: herdr.close_pane(pane.pane_id)).start()
    with pytest.raises(DeliveryError) as info:
        backend.deliver(entity(pane.pane_id), message("hi"))
    # retryable: the gateway retries, dead-letters after messaging.max_attempts (docs/design.md#invariant-6)
    assert info.value.retryable is True and f"herdr pane {pane.pane_id} is gone" in str(info.value)


def test_missing_pane_status_and_address(make_backend, herdr: FakeHerdr) -> None:
    backend = make_backend()
    with pytest.raises(DeliveryError) as info:
        backend.deliver(entity("w1:p99"), message("hi"))
    assert info.value.retryable is True and "herdr pane w1:p99 is gone" in str(info.value)
    assert backend.status(entity("w1:p99")) == "gone"
    pane = herdr.add_pane(agent="claude", status="working")
    assert backend.status(entity(pane.pane_id)) == "working"
    backend.check_address(pane.pane_id)
    for bad in (None, "", "%3", "w1:p1; x"):
        with pytest.raises(BridgeError):
            backend.check_address(bad)
    with pytest.raises(BridgeError, match="no pane w1:p77"):
        backend.check_address("w1:p77")


def test_herdr_down_is_a_retryable_failure(make_backend, herdr: FakeHerdr) -> None:
    backend = make_backend()
    pane = herdr.add_pane(agent="claude")
    herdr.stop()
    with pytest.raises(DeliveryError) as info:
        backend.deliver(entity(pane.pane_id), message("hi"))
    assert info.value.retryable is True and "herdr is not running" in str(info.value)
    assert backend.status(entity(pane.pane_id)) == "unknown"


def test_single_line_mode_for_apps_without_bracketed_paste(make_backend, herdr: FakeHerdr) -> None:
    backend = make_backend(multiline="line")
    pane = herdr.add_pane(agent="claude", bracketed_paste=False)
    backend.deliver(entity(pane.pane_id), message("one\ntwo"))
    assert len(pane.prompts) == 1  # a raw newline would have submitted "one" on its own
    assert "│ one  ⏎  │ two" in pane.prompts[0]
