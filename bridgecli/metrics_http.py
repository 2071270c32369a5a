"""The HTTP endpoint for operators of the gateway and the hub's registrar: ``GET /metrics``
(and ``GET /healthz`` when checks are given).

:class:`MetricsServer` binds when it is built, so a malformed or taken address stops its
process before it does any work (:class:`~bridgecli.errors.MetricsAddressError`, exit code 24);
it serves on a thread of its own. ``/metrics`` is the registry in Prometheus' text format;
``/healthz`` is 200 when every check is ok, else 503, with the checks as JSON.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from bridgecli import health
from bridgecli.errors import MetricsAddressError
from bridgecli.gateway import log as glog

#: the host a bare port (``9464``, ``:9464``) binds: never reachable from another machine
LOOPBACK = "127.0.0.1"
ADDRESS_FIX = "give PORT, HOST:PORT or [IPv6]:PORT with a free port (e.g. 9464, 127.0.0.1:9464)"


def parse_address(text: str) -> tuple[str, int]:
    """``(host, port)`` of ``PORT``, ``:PORT``, ``HOST:PORT`` or ``[IPv6]:PORT``; a bare
    port means loopback. Raises :class:`MetricsAddressError` when malformed."""
    raw = text.strip()
    host, sep, port = raw.rpartition(":")
    if not sep:
        host, port = "", raw
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise MetricsAddressError(f"metrics address {text!r}: an IPv6 host needs brackets", ADDRESS_FIX)
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise MetricsAddressError(f"metrics address {text!r}: {port!r} is not a port number", ADDRESS_FIX)
    return host or LOOPBACK, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class MetricsServer:
    """``/metrics`` from ``registry`` and, when ``checks`` is given, ``/healthz`` from
    ``checks()``, bound to ``address`` at construction (a warning on ``logger`` when it is not
    loopback); :meth:`start` serves on a thread, :meth:`stop` ends it."""

    def __init__(
        self,
        address: str,
        registry: CollectorRegistry,
        checks: Callable[[], list[health.Check]] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        host, port = parse_address(address)
        self.registry = registry
        self.checks = checks
        self.logger = logger or logging.getLogger("bridgecli.metrics")
        self.paths = "/metrics /healthz" if checks is not None else "/metrics"
        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
            server_class = type("_Server", (HTTPServer,), {"address_family": family})
            self.server = server_class((host, port), _handler(self))
        except OSError as exc:  # gaierror (unknown host), EADDRINUSE, EADDRNOTAVAIL, EACCES
            reason = exc.strerror or str(exc)
            raise MetricsAddressError(f"cannot serve metrics on {address}: {reason}", ADDRESS_FIX) from None
        self.host, self.port = host, self.server.server_address[1]
        self._thread: threading.Thread | None = None
        if not is_loopback(host):
            glog.event(
                self.logger,
                "metrics served beyond this machine: anyone who reaches the address can read them",
                logging.WARNING,
                address=f"{host}:{self.port}",
            )

    def start(self) -> None:
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.5,), name="metrics", daemon=True)
        self._thread.start()
        glog.event(self.logger, "metrics served", address=f"{self.host}:{self.port}", paths=self.paths)

    def stop(self) -> None:
        if self._thread is not None:
            self.server.shutdown()
            self._thread.join(5)
        self.server.server_close()

    def health(self) -> tuple[int, bytes]:
        """The status and JSON body of ``/healthz`` (404 when no checks were given)."""
        if self.checks is None:
            return 404, b'{"ok": false, "error": "no health checks here: try /metrics"}\n'
        checks = self.checks()
        body = health.report(checks)
        return (200 if body["ok"] else 503), json.dumps(body).encode() + b"\n"


def _handler(owner: MetricsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._reply(200, CONTENT_TYPE_LATEST, generate_latest(owner.registry))
            elif path == "/healthz":
                status, body = owner.health()
                self._reply(status, "application/json", body)
            else:
                self._reply(404, "text/plain; charset=utf-8", f"not found: try {owner.paths}\n".encode())

        def _reply(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
            pass  # a scrape every 15 s is not news

    return Handler
