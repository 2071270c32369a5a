"""The host session: how a one-shot command reaches this host's messaging, chosen once.

Two implementations serve the same request models (:mod:`bridgecli.requests`) with the same
typed results (:mod:`bridgecli.results`): :class:`bridgecli.gateway.client.GatewaySession` through the running gateway's
socket, and :class:`bridgecli.direct.DirectSession` straight to the broker and the host's
files when no gateway runs. Commands call :func:`open_session` and never branch on which.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bridgecli.config import Config
    from bridgecli.requests import (
        PollRequest,
        RegisterRequest,
        RosterRequest,
        SendRequest,
        ShowRequest,
        SpawnRequest,
        StopRequest,
        UnregisterRequest,
    )
    from bridgecli.results import (
        PollResult,
        RegisterResult,
        RosterResult,
        SendResult,
        ShowResult,
        SpawnResult,
        StopResult,
        UnregisterResult,
    )


class HostSession(Protocol):
    """One command's access to this host: each method takes a request model and returns its
    typed result (:mod:`bridgecli.results`)."""

    def send(self, request: SendRequest) -> SendResult: ...

    def register(self, request: RegisterRequest) -> RegisterResult: ...

    def unregister(self, request: UnregisterRequest) -> UnregisterResult: ...

    def poll(self, request: PollRequest) -> PollResult: ...

    def show(self, request: ShowRequest) -> ShowResult: ...

    def spawn(self, request: SpawnRequest) -> SpawnResult: ...

    def stop(self, request: StopRequest) -> StopResult: ...

    def roster(self, request: RosterRequest) -> RosterResult: ...

    def confirm(self, result: SendResult | PollResult) -> None:
        """The caller has passed on what ``result`` handed it (printed it): let its
        ``pending`` messages go."""

    def close(self) -> None: ...

    def __enter__(self) -> HostSession: ...

    def __exit__(self, *exc: object) -> None: ...


def open_session(config: Callable[[], Config], warn: Callable[[str], None]) -> HostSession:
    """The gateway's session when one listens on this host's socket, else the direct one
    (which loads ``config()`` and reports degraded outcomes through ``warn``)."""
    from bridgecli.gateway.client import GatewayClient, GatewaySession

    client = GatewayClient.connect()
    if client is not None:
        return GatewaySession(client)
    from bridgecli.direct import DirectSession

    return DirectSession(config(), warn)
