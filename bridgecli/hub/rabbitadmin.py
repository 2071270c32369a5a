"""A small client for the RabbitMQ management HTTP API (users, permissions, connections,
queues).

Standard library only (``urllib``): the hub talks to its own node over loopback, so an HTTP
client dependency would buy nothing. Every failure becomes :class:`BrokerUnavailable`
(:class:`ManagementRefused` when the API answered with an HTTP error).
"""

from __future__ import annotations

import base64
import http.client
import json
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

from bridgecli.errors import BrokerUnavailable

#: what ``_request(..., ok_404=True)`` returns when the API answered 404
_MISSING = object()


class ManagementRefused(BrokerUnavailable):
    """The management API answered with an HTTP error; ``status`` is its code (401, 400 …)."""

    def __init__(self, message: str, hint: str | None = None, *, status: int) -> None:
        super().__init__(message, hint)
        self.status = status


def _q(part: str) -> str:
    """One URL path segment: ``/`` (the default vhost) and every other reserved character
    percent-encoded."""
    return quote(part, safe="")


class RabbitAdmin:
    """The management API of the node at ``host:port`` as ``user``, scoped to ``vhost``.

    Without ``user`` it logs in as the embedded node's administrator (its credentials file),
    the one user that may manage the hub's users: the node has no ``guest``.
    """

    def __init__(
        self,
        port: int,
        user: str | None = None,
        password: str | None = None,
        host: str = "127.0.0.1",
        vhost: str = "/",
        timeout: float = 10.0,
    ) -> None:
        if user is None:
            from bridgecli import localbroker

            user, admin_password = localbroker.admin_credentials()
            password = admin_password if password is None else password
        if password is None:
            raise ValueError("RabbitAdmin needs the password of the user it is given")
        self.port = port
        self.user = user
        self.host = host
        self.vhost = vhost
        self.timeout = timeout
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        self._auth = f"Basic {token}"

    # --- users ---------------------------------------------------------------------------
    def put_user(self, name: str, password: str, tags: str = "") -> None:
        """Create ``name`` or replace its password and tags (comma-separated, "" = none)."""
        self._request("PUT", f"/api/users/{_q(name)}", {"password": password, "tags": tags})

    def delete_user(self, name: str) -> bool:
        """Delete ``name`` (its connections are closed by the broker); False when unknown."""
        return self._request("DELETE", f"/api/users/{_q(name)}", ok_404=True) is not _MISSING

    def user_exists(self, name: str) -> bool:
        return self._request("GET", f"/api/users/{_q(name)}", ok_404=True) is not _MISSING

    # --- permissions ---------------------------------------------------------------------
    def set_permissions(self, user: str, configure: str, write: str, read: str) -> None:
        """Set ``user``'s resource regexes in our vhost (replaces the previous ones)."""
        self._request(
            "PUT",
            f"/api/permissions/{_q(self.vhost)}/{_q(user)}",
            {"configure": configure, "write": write, "read": read},
        )

    def set_topic_permissions(self, user: str, exchange: str, write: str, read: str) -> None:
        """Set ``user``'s routing-key regexes for topic ``exchange`` in our vhost."""
        self._request(
            "PUT",
            f"/api/topic-permissions/{_q(self.vhost)}/{_q(user)}",
            {"exchange": exchange, "write": write, "read": read},
        )

    def clear_topic_permissions(self, user: str) -> None:
        """Remove every topic permission of ``user`` in our vhost (none is fine)."""
        self._request("DELETE", f"/api/topic-permissions/{_q(self.vhost)}/{_q(user)}", ok_404=True)

    # --- connections ---------------------------------------------------------------------
    def connections(self, user: str | None = None) -> list[dict[str, Any]]:
        """The node's client connections as the API reports them (``name``, ``user``,
        ``peer_host`` …), only ``user``'s when given."""
        # from the statistics database: a new connection shows up only after ~5 s on 3.10
        found = self._request("GET", "/api/connections") or []
        return [c for c in found if user is None or c.get("user") == user]

    def live_connections(self, user: str) -> list[dict[str, Any]]:
        """``user``'s connections right now, from the broker's connection tracking (no
        statistics lag), but only ``name``, ``user``, ``vhost`` and ``node`` per entry."""
        found = self._request("GET", f"/api/connections/username/{_q(user)}", ok_404=True)
        return [] if found is _MISSING or not found else found

    def close_connection(self, name: str, reason: str) -> None:
        """Force-close connection ``name``; the client sees CONNECTION_FORCED with ``reason``.
        A connection that is already gone is fine."""
        # header values are latin-1 on the wire and must not break the header line
        clean = " ".join(reason.split()).encode("ascii", "replace").decode("ascii")
        try:
            self._request("DELETE", f"/api/connections/{_q(name)}", headers={"X-Reason": clean}, ok_404=True)
        except ManagementRefused as exc:
            # a connection that just closed can still be listed, and its DELETE answers 500
            if exc.status != 500 or self._request("GET", f"/api/connections/{_q(name)}", ok_404=True) is not _MISSING:
                raise

    # --- queues --------------------------------------------------------------------------
    def queues(self) -> list[dict[str, Any]]:
        """Every queue of our vhost as the API reports it (``name``, ``type``, ``arguments`` …)."""
        found = self._request("GET", f"/api/queues/{_q(self.vhost)}?columns=name,type,durable,exclusive,auto_delete")
        return list(found or [])

    def queue_bindings(self, name: str) -> list[dict[str, Any]]:
        """The bindings of queue ``name`` (``source``, ``routing_key``, ``arguments``), the
        default exchange's implicit one included; [] for an unknown queue."""
        found = self._request("GET", f"/api/queues/{_q(self.vhost)}/{_q(name)}/bindings", ok_404=True)
        return [] if found is _MISSING or not found else list(found)

    # --- node ----------------------------------------------------------------------------
    def overview(self) -> dict[str, Any]:
        """``/api/overview``: versions, node name, listeners, totals."""
        return self._request("GET", "/api/overview") or {}

    def wait_ready(self, timeout: float) -> None:
        """Poll ``overview`` every 0.2 s until it answers; BrokerUnavailable after ``timeout``.

        A 401 fails at once: waiting cannot fix wrong credentials.
        """
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                self._request("GET", "/api/overview", timeout=max(0.1, min(self.timeout, remaining)))
                return
            except ManagementRefused as exc:
                if exc.status == 401:
                    raise
                last: BrokerUnavailable = exc
            except BrokerUnavailable as exc:
                last = exc
            if time.monotonic() + 0.2 > deadline:
                raise BrokerUnavailable(
                    f"the broker's management API on {self.host}:{self.port} did not answer "
                    f"within {timeout:g}s ({last.message})",
                    last.hint,
                )
            time.sleep(0.2)

    # --- transport -----------------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        ok_404: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Send one request; the parsed JSON answer, None for an empty one, ``_MISSING`` for
        a 404 when ``ok_404``. Any failure raises BrokerUnavailable."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://{self.host}:{self.port}{path}",
            data=data,
            method=method,
            headers={"Authorization": self._auth, "Content-Type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                if exc.code == 404 and ok_404:
                    return _MISSING
                raise ManagementRefused(
                    f"the broker's management API refused {method} {path}: HTTP {exc.code} {exc.reason}{_detail(exc)}",
                    "see the broker log (bridge broker logs)",
                    status=exc.code,
                ) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            why = getattr(exc, "reason", None) or exc
            raise BrokerUnavailable(
                f"cannot reach the broker's management API on {self.host}:{self.port} ({why})",
                "is the hub running? `bridge hub status`",
            ) from None
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise BrokerUnavailable(
                f"the broker's management API answered {method} {path} with something that is not JSON: {raw[:80]!r}",
                "is another service listening on its port?",
            ) from None


def _detail(exc: urllib.error.HTTPError) -> str:
    """``: <reason>`` from the API's JSON error body (``{"error":…, "reason":…}``), if any."""
    try:
        reason = json.loads(exc.read() or b"{}").get("reason")
    except (OSError, ValueError, AttributeError):
        return ""
    return f": {reason}" if isinstance(reason, str) and reason else ""
