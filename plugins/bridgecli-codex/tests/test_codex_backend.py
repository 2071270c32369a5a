"""The ``codex`` backend against the real ``codex app-server``: a message becomes turn input
that the thread gives back, a busy thread is steered, and every failure is a DeliveryError."""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest
from codex_helpers import stop_server, turns, user_texts, wait_for

from bridgecli.envelope import Envelope
from bridgecli.errors import BridgeError, ConfigError, DeliveryError, NotFound
from bridgecli.framing import render
from bridgecli.interfaces import STATUSES, Delivered, Entity, traits_of
from bridgecli_codex.backend import thread_state
from bridgecli_codex.client import Address, AppServer, Endpoint, parse_address


def entity(deliver: str) -> Entity:
    return Entity(gid=str(uuid.uuid4()), label="cx", role="agent", deliver=deliver, host="test", created=time.time())


def envelope(content: str) -> Envelope:
    return Envelope(kind="SEND", sender=str(uuid.uuid4()), recipient="cx", content=content, sender_label="lead")


def test_deliver_starts_a_turn_whose_input_is_the_frame(app_server, make_backend) -> None:
    address = app_server().address
    backend = make_backend()
    worker = entity(f"codex:{address}")
    backend.check_address(worker.address)
    assert traits_of(backend).delivered_how == "accepted" and traits_of(backend).inline is False
    assert backend.status(worker) == "idle"

    message = envelope("please review PR 7\nthen say LGTM")
    outcome = backend.deliver(worker, message)

    assert isinstance(outcome, Delivered) and (outcome.how, outcome.read) == ("accepted", True)
    (turn,) = turns(address)
    assert turn["id"] == outcome.ref and turn["status"] == "inProgress"
    frame = render(message)
    assert user_texts(turn) == [(message.msg_id, frame.text)]
    assert frame.text.startswith(f"[bridge {message.msg_id[:8]}] SEND from lead")
    assert "│ please review PR 7\n│ then say LGTM" in frame.text
    assert backend.status(worker) == "working"  # the model never answers: the turn runs on

    with AppServer(address.endpoint, 30) as server:
        server.call("turn/interrupt", {"threadId": address.thread_id, "turnId": outcome.ref})
    wait_for(lambda: backend.status(worker) == "idle", what="the thread idle after the interrupt")


def test_a_busy_thread_is_steered_with_the_message(app_server, make_backend) -> None:
    """A message for a thread whose turn is still running joins that turn (turn/start steers
    it) rather than waiting for it to end: the model reads it at its next step."""
    address = app_server().address
    backend = make_backend()
    worker = entity(f"codex:{address}")
    first, second = envelope("first"), envelope("second")
    one = backend.deliver(worker, first)
    two = backend.deliver(worker, second)
    assert one is not None and two is not None and one.ref == two.ref
    (turn,) = turns(address)
    assert [client for client, _ in user_texts(turn)] == [first.msg_id, second.msg_id]
    assert "│ second" in user_texts(turn)[1][1]


def test_a_thread_unloaded_by_a_restart_is_resumed(app_server, make_backend) -> None:
    """After the server restarts on the same socket and CODEX_HOME, the thread is only on
    disk: the delivery resumes it and starts the turn there."""
    running = app_server()
    backend = make_backend()
    worker = entity(f"codex:{running.address}")
    before = envelope("before the restart")
    backend.deliver(worker, before)
    stop_server(running.proc)
    assert backend.status(worker) == "gone"
    app_server(sock=Path(running.address.endpoint.target))
    later = envelope("after the restart")
    outcome = backend.deliver(worker, later)
    assert outcome is not None and outcome.ref
    texts = [user_texts(turn) for turn in turns(running.address)]
    assert [client for turn in texts for client, _ in turn] == [before.msg_id, later.msg_id]


def test_a_dead_server_is_a_retryable_failure_naming_it(app_server, make_backend) -> None:
    running = app_server()
    address = running.address
    backend = make_backend()
    worker = entity(f"codex:{address}")
    stop_server(running.proc)
    with pytest.raises(DeliveryError) as failed:
        backend.deliver(worker, envelope("anyone there?"))
    assert failed.value.retryable is True
    assert f"codex app-server at unix:{address.endpoint.target} is gone" in str(failed.value)
    assert "restart" in (failed.value.hint or "")
    assert backend.status(worker) == "gone"
    with pytest.raises(NotFound, match="no codex app-server answers"):
        backend.check_address(worker.address)


def test_an_unknown_thread_dead_letters_at_once(app_server, make_backend) -> None:
    address = app_server().address
    backend = make_backend()
    worker = entity(f"codex:{address.endpoint}#01a24400-0000-7000-8000-000000000000")
    with pytest.raises(DeliveryError, match="has no thread 01a24400") as failed:
        backend.deliver(worker, envelope("hello?"))
    assert failed.value.retryable is False  # retrying cannot create the thread
    assert backend.status(worker) == "gone"
    with pytest.raises(NotFound, match="has no thread"):
        backend.check_address(worker.address)


def test_a_socket_nobody_answers_on_times_out_retryably(short_tmp, make_backend) -> None:
    """A socket that accepts but never speaks (a hung server): a retryable failure after the
    configured timeout, not a hang."""
    sock = short_tmp / "silent.sock"
    silent = socket.socket(socket.AF_UNIX)
    silent.bind(str(sock))
    silent.listen(8)
    try:
        backend = make_backend(timeout=0.3)
        worker = entity(f"codex:unix:{sock}#t1")
        with pytest.raises(DeliveryError, match="cannot connect") as failed:
            backend.deliver(worker, envelope("hi"))
        assert failed.value.retryable is True
        assert backend.status(worker) in ("gone", "unknown")
    finally:
        silent.close()


def test_no_socket_at_all(short_tmp, make_backend) -> None:
    backend = make_backend()
    worker = entity(f"codex:unix:{short_tmp}/none.sock#t1")
    with pytest.raises(DeliveryError, match="no socket at") as failed:
        backend.deliver(worker, envelope("hi"))
    assert failed.value.retryable is True
    assert backend.status(worker) == "gone"


@pytest.mark.parametrize(
    ("text", "endpoint", "thread"),
    [
        ("unix:/run/cx/app.sock#01a2-x", Endpoint("unix", "/run/cx/app.sock"), "01a2-x"),
        ("unix:///run/cx/app.sock#t", Endpoint("unix", "/run/cx/app.sock"), "t"),
        ("ws://127.0.0.1:4500#t", Endpoint("ws", "ws://127.0.0.1:4500"), "t"),
    ],
)
def test_address_forms(text, endpoint, thread) -> None:
    address = parse_address(text)
    assert address == Address(endpoint, thread)
    assert parse_address(str(address)) == address


@pytest.mark.parametrize(
    "text",
    [None, "", "unix:/run/app.sock", "unix:run/app.sock#t", "unix:/a#", "unix:/a#has space", "http://h:1#t", "tmux:%3"],
)
def test_bad_addresses_are_refused_with_the_form(make_backend, text) -> None:
    with pytest.raises(ConfigError, match="codex") as failed:
        make_backend().check_address(text)
    assert "codex:unix:/abs/path/to/socket#THREAD_ID" in (failed.value.hint or "")


def test_bad_settings_name_the_key(make_backend) -> None:
    with pytest.raises(BridgeError, match=r"\[plugins.codex\] timeout"):
        make_backend(timeout="soon")


@pytest.mark.parametrize(
    ("status", "word"),
    [
        ({"type": "idle"}, "idle"),
        ({"type": "active", "activeFlags": []}, "working"),
        ({"type": "active", "activeFlags": ["waitingOnApproval"]}, "blocked"),
        ({"type": "active", "activeFlags": ["waitingOnUserInput"]}, "blocked"),
        ({"type": "notLoaded"}, "unknown"),
        ({"type": "systemError"}, "unknown"),
    ],
)
def test_thread_status_words(status, word) -> None:
    """Every ThreadStatus of the protocol (its JSON schema) maps to a bridge status word."""
    assert thread_state({"status": status}).status == word
    assert word in STATUSES
