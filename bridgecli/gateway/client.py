"""Client side of the gateway's local socket API — the CLI's fast path.

Newline-delimited JSON over a Unix socket (mode 0600 in the user runtime dir): one request
``{"op": NAME, ...}`` per line, one response per line, ``{"ok": true, ...}`` or
``{"ok": false, "error": {"code": EXITCODE_NAME, "message": ..., "hint": ...}}``. Several
requests may share one connection. Kept cheap for the one-shot ``bridge send`` and the TAB
that use it: no pika, the C module ``_socket`` rather than ``socket.py``
(:mod:`bridgecli.private_apis.unix_socket`), and the error types only when one is raised
(docs/decisions/raw-socket-client.md).
"""

from __future__ import annotations

from bridgecli import results, wirejson
from bridgecli.private_apis.unix_socket import LineConnection

# typing and pathlib cost ~15 % of the click-free `bridge send` (bridgecli.fast_send) that
# imports this module, so they are imported for type checkers only
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path
    from typing import Any

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


class GatewayClient:
    """A connection to the local gateway. Use :meth:`connect` (returns None when no gateway
    is listening) or :meth:`require` (raises a clear error)."""

    def __init__(self, connection: LineConnection, path: Path | str) -> None:
        self._connection = connection
        self.path = path

    @classmethod
    def connect(cls, path: Path | str | None = None, timeout: float = 2.0) -> GatewayClient | None:
        if path is None:
            from bridgecli import paths

            path = paths.gateway_socket()
        connection = LineConnection.connect(str(path), timeout)
        if connection is None:
            return None
        return cls(connection, path)

    @classmethod
    def require(cls, path: Path | str | None = None) -> GatewayClient:
        client = cls.connect(path)
        if client is None:
            from bridgecli import paths
            from bridgecli.errors import GatewayUnavailable

            where = path or paths.gateway_socket()
            raise GatewayUnavailable(
                f"no gateway is listening on {where}", "start one with `bridge gateway` (e.g. in tmux)"
            )
        return client

    def call(self, op: str, timeout: float | None = 30.0, **params: Any) -> dict[str, Any]:
        """Send one request and return the response's fields; raise the typed error if the
        gateway answered with one."""
        request = {"op": op, **params}
        try:
            line = self._connection.exchange(wirejson.dumps_compact(request).encode() + b"\n", timeout)
        except TimeoutError:
            from bridgecli.errors import Timeout

            raise Timeout(
                f"the gateway did not answer {op!r} within {timeout:g}s", "check `bridge status` and the gateway's log"
            ) from None
        except OSError as exc:
            from bridgecli.errors import GatewayUnavailable

            raise GatewayUnavailable(
                f"lost the connection to the gateway ({exc})", "check that `bridge gateway` is still running"
            ) from None
        if not line:
            from bridgecli.errors import GatewayUnavailable

            raise GatewayUnavailable(
                "the gateway closed the connection", "check that `bridge gateway` is still running"
            )
        response = wirejson.loads(line)
        if not response.get("ok"):
            from bridgecli.error_wire import from_wire

            raise from_wire(response.get("error") or {})
        return response

    def confirm(self, pending: Iterable[str]) -> None:
        """Tell the gateway this process has the messages ``pending`` names (an answer's
        ``pending``): call it once they are printed or passed on; until then they stay
        recoverable."""
        msg_ids = list(pending)
        if msg_ids:
            self.call("confirm", msg_ids=msg_ids)

    def confirm_pending(self, result: dict[str, Any]) -> None:
        """:meth:`confirm` the ``pending`` of a raw answer ``result``."""
        self.confirm(result.get("pending") or ())

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GatewaySession:
    """The host session (:class:`bridgecli.session.HostSession`) through the gateway's socket:
    each request model is one local-API call, its answer read as its typed result. Imports
    nothing heavy, so the click-free fast path (:mod:`bridgecli.fast_send`) uses it too."""

    def __init__(self, client: GatewayClient, wait_slack: float | None = None) -> None:
        self.client = client
        #: a send's wait for its reply times out this long after that wait (None: never;
        #: the CLI's, which Ctrl-C ends; the MCP server's calls must end)
        self.wait_slack = wait_slack

    def send(self, request: SendRequest) -> SendResult:
        # a bulk send lasts as long as it needs; a plain send gets a minute
        timeout: float | None = None if request.bulk else 60
        if request.wait:
            timeout = None if self.wait_slack is None else request.wait + self.wait_slack
        return results.SendResult.from_wire(self.client.call(request.OP, timeout=timeout, **request.to_wire()))

    def register(self, request: RegisterRequest) -> RegisterResult:
        return results.RegisterResult.from_wire(self.client.call(request.OP, **request.to_wire()))

    def unregister(self, request: UnregisterRequest) -> UnregisterResult:
        return results.UnregisterResult.from_wire(self.client.call(request.OP, **request.to_wire()))

    def poll(self, request: PollRequest) -> PollResult:
        return results.PollResult.from_wire(self.client.call(request.OP, timeout=None, **request.to_wire()))

    def show(self, request: ShowRequest) -> ShowResult:
        return results.ShowResult.from_wire(self.client.call(request.OP, **request.to_wire()))

    def spawn(self, request: SpawnRequest) -> SpawnResult:
        # the target host's readiness wait is bounded there (by the profile when not given)
        return results.SpawnResult.from_wire(self._control(request.OP, request.to_wire()))

    def stop(self, request: StopRequest) -> StopResult:
        return results.StopResult.from_wire(self._control(request.OP, request.to_wire()))

    def roster(self, request: RosterRequest) -> RosterResult:
        result = self.client.call(request.OP, host=request.host)
        result.pop("ok", None)
        return results.RosterResult.from_wire(result)

    def _control(self, op: str, wire: dict[str, Any]) -> dict[str, Any]:
        result = self.client.call(op, timeout=None, **wire)
        result.pop("ok", None)
        return result

    def confirm(self, result: SendResult | PollResult) -> None:
        self.client.confirm(result.pending)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> GatewaySession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def ping(path: Path | str | None = None) -> dict[str, Any] | None:
    """The gateway's ``status`` answer, or None when no gateway is listening."""
    from bridgecli.errors import BridgeError

    client = GatewayClient.connect(path)
    if client is None:
        return None
    with client:
        try:
            return client.call("status", timeout=5)
        except BridgeError:
            return None
