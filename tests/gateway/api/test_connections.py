"""A local API connection's life: the moves :data:`MOVES` allows, and nothing else."""

from __future__ import annotations

import socket

import pytest
from pika.adapters.select_connection import IOLoop

from bridgecli.gateway.api.connections import (
    MOVES,
    Client,
    ConnectionState,
    IllegalConnectionMove,
)


@pytest.fixture
def client():
    loop = IOLoop()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    yield Client(ours, loop), theirs
    theirs.close()
    ours.close()
    loop.close()


def test_a_connection_serves_until_it_hangs_up_then_is_dropped(client):
    conn, _ = client
    assert conn.state is ConnectionState.OPEN and conn.serving
    conn.hang_up()
    assert conn.state is ConnectionState.HUNG_UP and not conn.serving
    conn.hang_up()  # hanging up again stays put
    assert conn.state is ConnectionState.HUNG_UP
    conn.close()
    assert conn.state is ConnectionState.DROPPED


def test_a_failed_write_breaks_it_whatever_it_was_doing(client):
    conn, theirs = client
    theirs.close()
    conn.unwritten = b"x" * 1_000_000  # the rest of a response, its reader gone
    conn.write_more()
    assert conn.state is ConnectionState.BROKEN and conn.unwritten == b""
    conn.hang_up()  # a broken connection is past hanging up: it stays broken
    conn.mark_broken()
    assert conn.state is ConnectionState.BROKEN and not conn.serving


@pytest.mark.parametrize("move", ["hang_up", "mark_broken", "close"])
def test_a_dropped_connection_makes_no_move(client, move):
    conn, _ = client
    conn.close()
    with pytest.raises(IllegalConnectionMove, match="dropped connection cannot become"):
        getattr(conn, move)()
    assert conn.state is ConnectionState.DROPPED


def test_every_state_but_dropped_can_be_dropped_and_nothing_returns_to_open():
    for state, allowed in MOVES.items():
        assert ConnectionState.OPEN not in allowed
        assert (ConnectionState.DROPPED in allowed) is (state is not ConnectionState.DROPPED)
