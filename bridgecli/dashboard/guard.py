"""The dashboard's front door: every request passes here before any route sees it.

A request must be addressed to this loopback server by name (``Host``), come from no other
site (``Origin``, ``Sec-Fetch-Site``) and hold the random token (the printed URL's, then an
HttpOnly SameSite=Strict cookie); anything else gets 403 and no data. Why: the page shows a
fleet's messages and can purge dead letters (docs/dashboard.md, "Security"). Only ``GET
/metrics`` needs no token (a scraper has none): it carries counts, no message, gid or host.
"""

from __future__ import annotations

import hmac
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import cookie_parser
from starlette.responses import PlainTextResponse, RedirectResponse

#: methods that never change state; everything else also needs a same-origin ``Origin``
SAFE_METHODS = ("GET", "HEAD")
#: sent with every answer: scripts and styles from this server only, no framing, no caching
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]
#: paths a safe request may read without the token: counts only
OPEN_PATHS = ("/metrics",)
FORBIDDEN = "forbidden: open the URL that `bridge dashboard` printed (it carries the token)"


def cookie_name(port: int) -> str:
    """One cookie per port: cookies ignore ports, and two dashboards must not clobber each other."""
    return f"bridge_dashboard_{port}"


class Guard:
    """ASGI middleware enforcing the rules above around ``app``."""

    def __init__(self, app: Any, token: str, port: int) -> None:
        self.app = app
        self.token = token
        self.port = port
        self.cookie = cookie_name(port)
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here: the live view is server-sent events
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})  # refused before the handshake: 403
            return
        problem = self.refusal(scope)

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + SECURITY_HEADERS
            await send(message)

        if problem is not None:
            await PlainTextResponse(f"{FORBIDDEN} ({problem})", 403)(scope, receive, send_with_headers)
            return
        open_path = scope["path"] in OPEN_PATHS and scope["method"] in SAFE_METHODS
        if open_path or self._holds(cookie_parser(self._header(scope, b"cookie") or "").get(self.cookie)):
            await self.app(scope, receive, send_with_headers)
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if scope["path"] == "/" and scope["method"] == "GET" and self._holds((query.get("token") or [None])[0]):
            # trade the URL's token for the cookie, and drop it from the address bar and history
            response = RedirectResponse("/", 303)
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
            await response(scope, receive, send_with_headers)
            return
        await PlainTextResponse(f"{FORBIDDEN} (no valid token)", 403)(scope, receive, send_with_headers)

    def refusal(self, scope: dict[str, Any]) -> str | None:
        """Why the request's headers are refused, or None when they are acceptable."""
        host = self._header(scope, b"host")
        if host not in self.hosts:
            return f"Host {host!r} is not this dashboard"
        origin = self._header(scope, b"origin")
        if origin is not None and origin not in self.origins:
            return f"Origin {origin!r} is another site"
        if self._header(scope, b"sec-fetch-site") not in (None, "same-origin", "none"):
            return "the request comes from another site"
        if scope["method"] not in SAFE_METHODS and origin is None:
            return f"{scope['method']} without an Origin header"
        return None

    def _holds(self, candidate: str | None) -> bool:
        if not candidate:
            return False
        return hmac.compare_digest(candidate.encode(), self.token.encode())

    @staticmethod
    def _header(scope: dict[str, Any], name: bytes) -> str | None:
        for key, value in scope.get("headers", []):
            if key == name:
                return value.decode("latin-1")
        return None
