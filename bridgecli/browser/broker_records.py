"""The broker's records: a connection, an executor, an agent, a group's owner, a pending command.

Plain data with no routing rules, so :mod:`bridgecli.browser.broker` holds only the rules and
its state reads as these few types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class Conn(Protocol):
    """One connection as the broker sees it."""

    def send(self, frame: dict[str, Any]) -> None:
        """Deliver one frame; may raise if the peer is gone (the broker ignores that)."""

    def close(self, code: int, reason: str) -> None:
        """Close the connection with a WebSocket close code."""


@dataclass
class Executor:
    client_id: str
    conn: Conn
    executor_id: str  #: the stable per-install id (hello.id), or the client id without one
    label: str
    browser: str | None
    seq: int  #: connection order: the first connected is the default executor


@dataclass
class Agent:
    client_id: str
    conn: Conn
    label: str | None


@dataclass
class Owner:
    executor_id: str
    agent_id: str | None  #: None = orphaned, adoptable by the next agent that uses the group


@dataclass
class Pending:
    agent_id: str | None  #: None: the broker's own ``tabs`` query for the ownership rebuild
    agent_req_id: Any
    executor_id: str
    action: str
    group: str | None
    params: dict[str, Any]
    created_group: bool
    started: float = field(default=0.0)
    internal: bool = False  #: the broker's own query; the answer is never sent to an agent
    #: for the rebuild query: the groups recorded for this executor when it was asked, so the
    #: answer can drop the ones it no longer runs without touching groups opened since
    known: frozenset[str] = frozenset()
