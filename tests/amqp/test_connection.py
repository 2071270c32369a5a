"""A connection cut while it opens is an unreachable broker, not an internal error.

A network cut can reset a TCP connection after pika's connect completes and before AMQP
starts on it; pika then raises a bare ValueError from inside its I/O loop. The cut cannot be
timed from a test, so these make the kernel's answer happen: the socket pika opens reports
"not connected" (ENOTCONN), as the cut socket does, and the rest is real pika.
"""

from __future__ import annotations

import errno
import socket
import types
from collections.abc import Iterator

import pytest
from pika.adapters.utils import connection_workflow

from bridgecli import config
from bridgecli.amqp.connection import connect
from bridgecli.amqp.stepped import SteppedConnection
from bridgecli.errors import BrokerUnavailable, ExitCode


class _CutSocket(socket.socket):
    def getpeername(self) -> object:
        raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")


@pytest.fixture
def cut_on_open(monkeypatch) -> Iterator[str]:
    """A broker URI whose TCP connect succeeds and whose socket is then cut."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    module = types.SimpleNamespace(**{k: getattr(socket, k) for k in dir(socket) if not k.startswith("__")})
    module.socket = _CutSocket
    monkeypatch.setattr(connection_workflow, "socket", module)
    yield f"amqp://guest:guest@127.0.0.1:{listener.getsockname()[1]}/"
    listener.close()


@pytest.mark.parametrize("opener", [connect, SteppedConnection], ids=["blocking", "stepped"])
def test_a_cut_while_opening_reads_as_an_unreachable_broker(cut_on_open, opener) -> None:
    with pytest.raises(BrokerUnavailable, match="cannot reach the AMQP broker .*StreamLostError") as caught:
        opener(config.load({"broker.uri": cut_on_open}), name="test-cut", connect_timeout=1)
    assert caught.value.exit_code == ExitCode.BROKER_UNAVAILABLE


def test_doctor_reads_a_cut_while_opening_as_no_server_properties(cut_on_open) -> None:
    from bridgecli import doctor

    assert doctor.server_properties(config.load({"broker.uri": cut_on_open}), cut_on_open) == {}
