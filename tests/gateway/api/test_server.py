"""The gateway's local socket: hostile and malformed requests never take it down."""

from __future__ import annotations

import json
import os
import select
import socket
import stat


def _raw(path, payload: bytes) -> list[dict]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(path))
    sock.sendall(payload)
    sock.shutdown(socket.SHUT_WR)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    return [json.loads(line) for line in data.splitlines()]


def test_bad_requests_get_errors_and_the_gateway_stays_up(host_factory):
    a = host_factory("a")
    a.register("main", role="main")
    a.start_gateway()
    assert stat.S_IMODE(os.stat(a.socket).st_mode) == 0o600
    nested = b"[" * 100_000 + b"]" * 100_000  # deeper than the JSON scanner goes
    answers = _raw(
        a.socket,
        b'not json\n[1]\n{"op": 5}\n{"op":"nope"}\n{"op":"send","bogus":1}\n' + nested + b'\n{"op":"status"}\n',
    )
    assert [x["ok"] for x in answers] == [False, False, False, False, False, False, True]
    assert answers[3]["error"]["message"].startswith("unknown operation")
    assert answers[4]["error"]["code"] == "REJECTED"
    # a huge line is refused, not buffered forever
    big = _raw(a.socket, b'{"op":"status","x":"' + b"a" * (9 * 1024 * 1024) + b'"}\n')
    assert big and big[0]["ok"] is False
    assert a.gateway.poll() is None
    shown = a.bridge("status")
    # the table's last row ends its line: nothing printed next runs into it
    assert shown.returncode == 0 and shown.stdout.endswith("\n") and shown.stdout.splitlines()[-1].startswith("main ")


def test_second_gateway_for_the_same_host_is_refused(host_factory):
    a = host_factory("a")
    a.start_gateway()
    import subprocess

    from tests.support.env import BRIDGE_BIN

    second = subprocess.run([BRIDGE_BIN, "gateway"], env=a.env, capture_output=True, text=True, timeout=30)
    assert second.returncode == 13 and "already running" in second.stderr
    assert a.gateway.poll() is None
    assert a.socket.exists(), "the refused gateway removed the running one's socket"
    assert a.bridge("status").returncode == 0


def test_sigterm_stops_cleanly_and_removes_the_socket(host_factory):
    a = host_factory("a")
    a.start_gateway()
    assert a.stop_gateway() == 0
    assert not a.socket.exists()
    assert "gateway stopped" in a.log_path.read_text()


def test_every_error_type_crosses_the_socket_with_its_exit_code():
    """A typed error raised in the gateway reaches the CLI as the same type and exit code:
    every error class of bridgecli.errors comes back as itself (the wire names the class)."""
    import inspect

    from bridgecli import errors
    from bridgecli.error_wire import from_wire as error_from_wire
    from bridgecli.error_wire import to_wire as error_to_wire

    classes = [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.BridgeError) and cls is not errors.BridgeError
    ]
    assert classes
    for cls in classes:
        back = error_from_wire(json.loads(json.dumps(error_to_wire(cls("it broke", "fix it")))))
        assert back.exit_code == cls.exit_code, cls.__name__
        assert (back.message, back.hint) == ("it broke", "fix it")
        assert type(back) is cls, cls.__name__  # the wire names the class: Unconfirmed stays Unconfirmed
    declared = [cls.exit_code for cls in classes if "exit_code" in vars(cls)]
    codes = [code for code in declared if code != errors.ExitCode.FAILURE]
    assert len(codes) == len(set(codes)), "two classes declare one exit code: the wire cannot tell them apart"
    assert errors.error_class("NO_SUCH_CODE") is errors.BridgeError


def test_thousands_of_pipelined_requests_are_answered_in_order(host_factory):
    """All of them, though the client half-closes before it reads any answer: far more
    answers than the socket holds wait for it to read."""
    a = host_factory("a")
    a.start_gateway()
    lines = [b'{"op":"confirm","msg_ids":[]}\n', b"not json\n"] * 10_000 + [b'{"op":"status"}\n']
    answers = _raw(a.socket, b"".join(lines))
    assert len(answers) == 20_001
    assert [x["ok"] for x in answers[:4]] == [True, False, True, False] and answers[-1]["ok"] is True
    assert a.gateway.poll() is None


def test_a_client_that_reads_nothing_holds_up_no_one(host_factory):
    a = host_factory("a")
    a.register("main", role="main")
    a.start_gateway()
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.connect(str(a.socket))
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = b'{"op":"confirm","msg_ids":[' + b",".join(b'"%d"' % i for i in range(2000)) + b"]}\n"
    stuck.setblocking(False)
    sent = 0
    try:
        for _ in range(200):  # answers pile up unread until the gateway's writes would block
            sent += stuck.send(request)
    except BlockingIOError:
        pass
    assert sent > len(request)
    shown = a.bridge("status")
    assert shown.returncode == 0 and "main" in shown.stdout
    stuck.close()
    assert a.bridge("status").returncode == 0 and a.gateway.poll() is None


def test_a_client_whose_input_ended_is_watched_only_while_its_answer_waits_for_room():
    """After a half-close the socket is readable (end of input) at every turn of the loop:
    watching it for input still would spin the loop until the client's request ends."""
    from bridgecli.amqp.stepped import Stepper
    from bridgecli.gateway.api.connections import Client

    stepper = Stepper()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.settimeout(10)
    client, calls = Client(ours, stepper.ioloop), []

    def handler(_fd, events):
        calls.append(events)
        if events & select.POLLOUT:
            client.write_more()
        elif not ours.recv(100):
            client.end_input()

    client.watch(handler)
    theirs.shutdown(socket.SHUT_WR)
    for _ in range(20):
        stepper.step(0.001)
    assert len(calls) == 1 and client.input_ended  # the end of input, once
    assert client.write(b"x" * 1_000_000) and client.unwritten  # more than the socket takes at once
    received = bytearray()
    while len(received) < 1_000_000:
        received += theirs.recv(1 << 20)
        stepper.step(0.001)
    assert not client.unwritten and all(events == select.POLLOUT for events in calls[1:])
    written = len(calls)
    for _ in range(20):
        stepper.step(0.001)
    assert len(calls) == written  # all written: not watched at all
    client.close()
    theirs.close()
    stepper.close()
