"""The fake answers as herdr's socket API is documented (README.md#herdr-api; raw socket, no client),
so the plugin's other tests are tests against herdr's contract, not against our own client."""

from __future__ import annotations

import json
import socket
import threading
import time

from fake_herdr import FakeHerdr


def raw(fake: FakeHerdr, line: bytes) -> tuple[dict, bytes]:
    """One connection: send ``line``, read until the server closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(str(fake.path))
        sock.sendall(line)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    first, _, rest = data.partition(b"\n")
    return json.loads(first), rest


def call(fake: FakeHerdr, method: str, params: dict | None = None, rid: str = "cli:request") -> dict:
    return raw(fake, json.dumps({"id": rid, "method": method, "params": params or {}}).encode() + b"\n")[0]


def test_ping_echoes_id_and_answers_once(herdr: FakeHerdr) -> None:
    answer, rest = raw(herdr, b'{"id":"api-client:status","method":"ping","params":{}}\n')
    assert answer == {
        "id": "api-client:status",
        "result": {
            "type": "pong",
            "version": "0.8.2",
            "protocol": 20,
            "capabilities": {"live_handoff": True, "detached_server_daemon": False},
        },
    }
    assert rest == b""  # exactly one line, then the server closed


def test_garbage_and_unknown_methods_have_an_empty_id(herdr: FakeHerdr) -> None:
    for line in (
        b"not json\n",
        b'{"id":"x","method":"pane.explode","params":{}}\n',
        # misspellings of documented methods are unknown methods too, never aliases
        b'{"id":"x","method":"pane_list","params":{}}\n',
        b'{"id":"x","method":"pane.list.","params":{}}\n',
        b'{"id":"x","method":"agent.get.","params":{}}\n',
        b'{"id":"x","method":"_pane","params":{}}\n',
        b'{"id":"x","method":"pane.get","params":{}}\n',
        b"[1,2]\n",
    ):
        answer, _ = raw(herdr, line)
        assert answer["id"] == "" and answer["error"]["code"] == "invalid_request"
        assert answer["error"]["message"].startswith("invalid request: ")


def test_pane_shapes_and_not_found(herdr: FakeHerdr) -> None:
    pane = herdr.add_pane(agent="claude", name="reviewer")
    listed = call(herdr, "pane.list")["result"]
    assert listed["type"] == "pane_list"
    info = listed["panes"][0]
    assert {"pane_id", "terminal_id", "workspace_id", "tab_id", "focused", "agent_status", "revision"} <= info.keys()
    assert "cwd" not in info  # absent optionals are omitted
    agent = call(herdr, "agent.get", {"target": "reviewer"})["result"]["agent"]
    # AgentInfo carries PaneInfo's required keys (README.md#herdr-methods), focused included
    assert {"pane_id", "terminal_id", "workspace_id", "tab_id", "focused", "agent_status", "revision"} <= agent.keys()
    assert agent["pane_id"] == pane.pane_id and agent["state_change_seq"] == 0 and agent["name"] == "reviewer"
    missing = call(herdr, "pane.get", {"pane_id": "w1:p99"}, rid="a")
    assert missing == {"id": "a", "error": {"code": "pane_not_found", "message": "pane w1:p99 not found"}}


def test_invalid_key_is_rejected_before_any_byte(herdr: FakeHerdr) -> None:
    pane = herdr.add_pane()
    answer = call(herdr, "pane.send_keys", {"pane_id": pane.pane_id, "keys": ["a", "pagedown"]})
    assert answer["error"] == {"code": "invalid_key", "message": "unsupported key pagedown"}
    assert herdr.pane_bytes(pane.pane_id) == b""
    sent = call(herdr, "pane.send_keys", {"pane_id": pane.pane_id, "keys": ["C-c", "Enter"]})
    assert sent["result"] == {"type": "ok"}
    assert herdr.pane_bytes(pane.pane_id) == b"\x03\r"


def test_send_input_wraps_in_bracketed_paste_only_when_enabled(herdr: FakeHerdr) -> None:
    on, off = herdr.add_pane(), herdr.add_pane(bracketed_paste=False)
    for pane in (on, off):
        call(herdr, "pane.send_input", {"pane_id": pane.pane_id, "text": "# hi", "keys": ["Enter"]})
    assert herdr.pane_bytes(on.pane_id) == b"\x1b[200~# hi\x1b[201~\r"
    assert herdr.pane_bytes(off.pane_id) == b"# hi\r"
    call(herdr, "pane.send_text", {"pane_id": on.pane_id, "text": "x\x1b[201~"})
    assert herdr.pane_bytes(on.pane_id).endswith(b"x\x1b[201~")  # send_text is verbatim


def test_split_ids_are_fresh_and_never_reused(herdr: FakeHerdr) -> None:
    first = call(herdr, "pane.split", {"direction": "right"})["result"]["pane"]["pane_id"]
    herdr.close_pane(first)
    second = call(herdr, "pane.split", {"target_pane_id": None, "direction": "down"})["result"]["pane"]["pane_id"]
    assert first != second and first.startswith("w1:p")
    assert call(herdr, "pane.split", {"target_pane_id": first})["error"]["code"] == "pane_not_found"


def test_split_panes_get_herdrs_environment(herdr: FakeHerdr) -> None:
    """README.md#herdr-env: every managed pane gets HERDR_* and TERM; herdr's keys win over the caller's."""
    answer = call(
        herdr,
        "pane.split",
        {
            "direction": "right",
            "env": {"ROLE": "tests", "HERDR_PANE_ID": "forged", "TERM": "dumb", "CODEX_THREAD_ID": "t1"},
        },
    )
    pane = herdr.panes[answer["result"]["pane"]["pane_id"]]
    assert pane.env == {
        "ROLE": "tests",
        "HERDR_ENV": "1",
        "HERDR_SOCKET_PATH": str(herdr.path),
        "HERDR_BIN_PATH": herdr.bin_path,
        "HERDR_WORKSPACE_ID": "w1",
        "HERDR_TAB_ID": "w1:t1",
        "HERDR_PANE_ID": pane.pane_id,
        "TERM": "xterm-256color",
        "COLORTERM": "truecolor",
    }


def test_prompt_with_wait_reports_a_stalled_agent(herdr: FakeHerdr, monkeypatch) -> None:
    """README.md#herdr-no-proof: ``agent.prompt`` with ``wait`` answers ``agent_prompt_stalled`` when the
    agent's state does not change after the prompt; a prompt that moves it is answered normally."""
    herdr.prompt_stall = 0.5  # herdr's 5 s, shortened for the test
    pane = herdr.add_pane(agent="claude", name="reviewer")
    ok = call(
        herdr,
        "agent.prompt",
        {"target": "reviewer", "text": "hi", "wait": {"until": ["idle", "done"], "timeout_ms": 5000}},
    )
    assert ok["result"]["type"] == "agent_prompted" and pane.prompts == ["hi"]
    herdr.add_pane(agent="claude", name="stuck")
    monkeypatch.setattr(herdr, "_submit", lambda pane: None)  # the Enter is swallowed (README.md#herdr-no-proof)
    started = time.monotonic()
    stalled = call(
        herdr,
        "agent.prompt",
        {"target": "stuck", "text": "hello", "wait": {"until": ["idle"], "timeout_ms": 5000}},
        rid="p",
    )
    assert stalled["id"] == "p" and stalled["error"]["code"] == "agent_prompt_stalled"
    assert 0.4 <= time.monotonic() - started < 4


def test_waits_hold_the_connection_and_answer_once(herdr: FakeHerdr) -> None:
    pane = herdr.add_pane(agent="codex", status="working")
    threading.Timer(0.3, lambda: herdr.set_status(pane.pane_id, "idle")).start()
    started = time.monotonic()
    answer = call(herdr, "agent.wait", {"target": pane.pane_id, "until": ["idle"], "timeout_ms": 5000})
    assert answer["result"]["type"] == "agent_info" and time.monotonic() - started >= 0.25
    timed_out = call(
        herdr,
        "events.wait",
        {
            "match_event": {"event": "pane_agent_status_changed", "pane_id": pane.pane_id, "agent_status": "blocked"},
            "timeout_ms": 200,
        },
    )
    assert timed_out["error"] == {"code": "timeout", "message": "timed out waiting for event match"}
    matched = call(
        herdr,
        "events.wait",
        {"match_event": {"event": "pane_agent_status_changed", "pane_id": pane.pane_id, "agent_status": "idle"}},
    )
    assert matched["result"]["event"]["data"]["agent_status"] == "idle"
    out = call(
        herdr,
        "pane.wait_for_output",
        {"pane_id": pane.pane_id, "source": "recent", "match": {"type": "regex", "value": "("}},
    )
    assert out["error"]["code"] == "invalid_regex"


def test_subscribe_acks_then_streams_both_event_shapes(herdr: FakeHerdr) -> None:
    pane = herdr.add_pane(agent="claude", status="working")
    request = {
        "id": "s",
        "method": "events.subscribe",
        "params": {
            "subscriptions": [
                {"type": "pane.agent_status_changed", "pane_id": pane.pane_id, "agent_status": "idle"},
                {"type": "pane.created"},
                {"type": "pane.closed"},
            ]
        },
    }
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(str(herdr.path))
        sock.sendall(json.dumps(request).encode() + b"\n")
        lines = sock.makefile("rb")
        assert json.loads(lines.readline()) == {"id": "s", "result": {"type": "subscription_started"}}
        herdr.set_status(pane.pane_id, "blocked")  # filtered out: not idle
        herdr.set_status(pane.pane_id, "idle")
        other = herdr.add_pane()
        herdr.close_pane(other.pane_id)
        events = [json.loads(lines.readline()) for _ in range(3)]
    assert events[0] == {
        "event": "pane.agent_status_changed",
        "data": {"pane_id": pane.pane_id, "workspace_id": "w1", "agent_status": "idle", "agent": "claude"},
    }
    assert events[1]["event"] == "pane_created" and events[1]["data"]["type"] == "pane_created"
    assert events[1]["data"]["pane"]["pane_id"] == other.pane_id
    assert events[2] == {
        "event": "pane_closed",
        "data": {"type": "pane_closed", "pane_id": other.pane_id, "workspace_id": "w1"},
    }
    assert (
        call(
            herdr,
            "events.subscribe",
            {"subscriptions": [{"type": "pane.agent_status_changed", "pane_id": "w1:p99"}]},
            rid="x",
        )["error"]["code"]
        == "pane_not_found"
    )
