"""The ``opencode`` backend against a real ``opencode serve``: a delivery is a stored user
message carrying the frame's marker, and every way the server can fail is a DeliveryError."""

from __future__ import annotations

import socket

import pytest
from oc_helpers import dump, envelope, user_texts, wait_for

from bridgecli.errors import DeliveryError
from bridgecli.interfaces import HOW_ACCEPTED, Delivered, traits_of
from bridgecli_opencode.backend import OpenCodeBackend, OpenCodeSettings

pytestmark = pytest.mark.slow  # the module's server takes seconds to start


def test_deliver_returns_the_stored_user_message(oc_server, make_backend) -> None:
    backend = make_backend()
    assert traits_of(backend).delivered_how == HOW_ACCEPTED
    session = oc_server.new_session()
    entity = oc_server.entity(session)
    env = envelope("please review PR 7\nthen say LGTM")
    marker = f"[bridge {env.msg_id[:8]}]"

    got = backend.deliver(entity, env)

    assert isinstance(got, Delivered) and got.how == HOW_ACCEPTED and got.read is True
    stored = user_texts(oc_server.messages(session))
    assert got.ref in stored, dump(oc_server.messages(session))
    text = stored[got.ref]
    assert text.startswith(f"{marker} SEND from lead")
    assert "│ please review PR 7\n│ then say LGTM" in text and f"answer with: bridge reply {env.msg_id}" in text
    # the session runs a turn for it (the made-up key makes the model call fail and retry)
    wait_for(lambda: backend.status(entity) == "working", what="the session to be working")


def test_retry_of_a_stored_message_does_not_post_it_again(oc_server, make_backend) -> None:
    backend = make_backend()
    session = oc_server.new_session()
    entity = oc_server.entity(session)
    env = envelope("once only")
    first = backend.deliver(entity, env)
    again = backend.deliver(entity, env)
    assert again.ref == first.ref
    assert list(user_texts(oc_server.messages(session))) == [first.ref]
    other = backend.deliver(entity, envelope("a second message"))
    assert other.ref != first.ref and list(user_texts(oc_server.messages(session))) == [first.ref, other.ref]


def test_status_of_a_fresh_session_is_idle(oc_server, make_backend) -> None:
    backend = make_backend()
    assert backend.status(oc_server.entity(oc_server.new_session())) == "idle"


def test_unknown_session_is_refused(oc_server, make_backend) -> None:
    backend = make_backend()
    with pytest.raises(DeliveryError) as caught:
        backend.deliver(oc_server.entity("ses_doesnotexist0123"), envelope("hello?"))
    assert caught.value.retryable is False
    assert "404 NotFoundError: Session not found: ses_doesnotexist0123" in str(caught.value)
    assert "re-register with a session that exists" in str(caught.value)


def test_wrong_password_is_refused(oc_server, make_backend, tmp_path) -> None:
    wrong = tmp_path / "pw"
    wrong.write_text("not-the-password\n")
    entity = oc_server.entity(oc_server.new_session())
    entity = type(entity)(**{**entity.__dict__, "launch_data": {}})
    backend = make_backend(f'password_file = "{wrong}"\n')
    with pytest.raises(DeliveryError) as caught:
        backend.deliver(entity, envelope("let me in"))
    assert caught.value.retryable is False and "401" in str(caught.value) and "password_file" in str(caught.value)
    # without any password the server refuses too: it is not open to other local users
    bare = OpenCodeBackend(OpenCodeSettings(), env={})
    with pytest.raises(DeliveryError, match="401"):
        bare.deliver(entity, envelope("let me in"))


def _dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_dead_server_is_a_retryable_failure(oc_server, make_backend) -> None:
    backend = make_backend()
    port = _dead_port()
    entity = oc_server.entity("ses_gone0123")
    entity = type(entity)(**{**entity.__dict__, "deliver": f"opencode:http://127.0.0.1:{port}#ses_gone0123"})
    with pytest.raises(DeliveryError) as caught:
        backend.deliver(entity, envelope("anyone there?"))
    reason = str(caught.value)
    assert caught.value.retryable is True
    assert f"nothing answers at http://127.0.0.1:{port}" in reason and "the server is gone" in reason
    assert f"opencode serve --port {port}" in reason
    assert backend.status(entity) == "gone"
