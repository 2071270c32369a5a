"""Opening pika connections from configuration, and mapping pika's errors to ours.

Every AMQP client in bridge (gateway, one-shot commands, doctor) connects through
:func:`connect` so that heartbeats, timeouts, TLS and multi-node URIs are handled once.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

import pika
import pika.connection
import pika.exceptions

from bridgecli.errors import BrokerUnavailable

if TYPE_CHECKING:
    from bridgecli.config import Config

#: pika exceptions that mean "the connection is gone; reconnect"
CONNECTION_ERRORS = (
    pika.exceptions.AMQPConnectionError,
    pika.exceptions.ConnectionClosed,
    pika.exceptions.StreamLostError,
    pika.exceptions.ChannelWrongStateError,
    ConnectionError,
    OSError,
)


def redact(uri: str) -> str:
    """A URI with its password hidden, for logs and status output."""
    if "@" not in uri or "://" not in uri:
        return uri
    scheme, rest = uri.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def parameters(
    config: Config,
    uris: list[str] | None = None,
    *,
    heartbeat: int | None = None,
    connect_timeout: float = 5.0,
    name: str = "bridge",
) -> list[pika.URLParameters]:
    """pika parameters for each configured broker URI (tried in order by pika)."""
    from bridgecli.amqp.uri import resolve_broker_uri

    result = []
    for uri in uris or resolve_broker_uri(config):
        params = pika.URLParameters(uri)
        params.heartbeat = heartbeat if heartbeat is not None else config.values["broker.heartbeat"]
        params.blocked_connection_timeout = 60
        params.socket_timeout = connect_timeout
        params.stack_timeout = connect_timeout * 2
        params.connection_attempts = 1
        params.client_properties = {"connection_name": name, "product": "bridgecli"}
        if uri.startswith("amqps://"):
            params.ssl_options = pika.SSLOptions(_tls_context(config), params.host)
        result.append(params)
    return result


def username(config: Config) -> str | None:
    """The AMQP user every configured broker URI names (pika's default ``guest`` for none),
    read from the parameters we build ourselves rather than from pika's private connection
    state. None when the URIs name different users, since which one connected is then
    unknown: publishers set it as ``user_id``, which the broker checks against the login."""
    from bridgecli.amqp.uri import resolve_broker_uri

    users = {pika.URLParameters(uri).credentials.username for uri in resolve_broker_uri(config)}
    return users.pop() if len(users) == 1 else None


def _tls_context(config: Config) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=config.values.get("broker.tls_ca"))
    cert, key = config.values.get("broker.tls_cert"), config.values.get("broker.tls_key")
    if cert:
        context.load_cert_chain(cert, key)
    return context


def connect(
    config: Config,
    *,
    name: str = "bridge",
    heartbeat: int | None = None,
    connect_timeout: float = 5.0,
    uris: list[str] | None = None,
) -> pika.BlockingConnection:
    """Open a blocking connection to the first reachable configured broker."""
    params = parameters(config, uris, heartbeat=heartbeat, connect_timeout=connect_timeout, name=name)
    try:
        return open_blocking(params)
    except (pika.exceptions.AMQPConnectionError, OSError) as exc:
        raise refused(exc, params, config, connect_timeout) from None


def open_blocking(params: pika.connection.Parameters | list[pika.URLParameters]) -> pika.BlockingConnection:
    """``pika.BlockingConnection(params)``, where a connection cut while it opens raises
    :class:`pika.exceptions.StreamLostError` like any other lost connection."""
    try:
        return pika.BlockingConnection(params)
    except ValueError as exc:
        raise cut_while_opening(exc) from None


def cut_while_opening(exc: ValueError) -> pika.exceptions.StreamLostError:
    """The connection error meant by pika's bare ``ValueError`` when the TCP connection it
    has just opened is reset before AMQP starts on it (a network cut, not a bug); any other
    ``ValueError`` is re-raised. Why: pika raises it from inside its I/O loop, unwrapped."""
    if not str(exc).startswith("Expected connected socket"):
        raise exc
    return pika.exceptions.StreamLostError(f"the connection was cut while it opened ({exc})")


def refused(exc: BaseException, params: list[pika.URLParameters], config: Config, timeout: float) -> BrokerUnavailable:
    """Our error for a failed connection attempt to ``params``: credentials, vhost, TLS or an
    unreachable broker, each with its fix (every kind of connection maps its failures here)."""
    if isinstance(exc, pika.exceptions.ProbableAuthenticationError):
        hub = config.values.get("hub.id")
        return BrokerUnavailable(
            f"the broker at {params[0].host}:{params[0].port} refused the credentials of this host",
            f"if hub {hub} revoked this host, ask its operator for a new invite "
            f"(`bridge hub invite {config.host_id} --replace`) and run `bridge join` again"
            if hub
            else "check the user and password in broker.uri / BRIDGE_BROKER_URI",
        )
    if isinstance(exc, pika.exceptions.ProbableAccessDeniedError):
        return BrokerUnavailable(
            "the broker refused access to the virtual host", "check the vhost in broker.uri and the user's permissions"
        )
    hosts = ", ".join(f"{p.host}:{p.port}" for p in params)
    tls = [p for p in params if p.ssl_options is not None]
    if tls:
        return _tls_problem(tls, config, timeout) or BrokerUnavailable(
            f"cannot open a TLS connection to the AMQP broker at {hosts} ({type(exc).__name__})",
            "check the broker's TLS listener and broker.tls_ca / tls_cert / tls_key",
        )
    return BrokerUnavailable(
        f"cannot reach the AMQP broker at {hosts} ({type(exc).__name__})",
        "start one with `bridge broker start` or fix broker.uri / BRIDGE_BROKER_URI",
    )


def _tls_problem(params: list[pika.URLParameters], config: Config, timeout: float) -> BrokerUnavailable | None:
    """Why a TLS connection failed, found by redoing its steps without AMQP: the address
    unreachable, or the handshake refused (and why), so that a TLS problem reads as one."""
    import socket

    from bridgecli.errors import TlsError

    found: BrokerUnavailable | None = None
    for p in params:
        try:
            raw = socket.create_connection((p.host, p.port), timeout=timeout)
        except OSError as exc:
            found = found or BrokerUnavailable(
                f"cannot reach the AMQP broker at {p.host}:{p.port} ({exc.strerror or exc})",
                "check that the broker runs there and the network between (is it the right address?)",
            )
            continue
        try:
            with _tls_context(config).wrap_socket(raw, server_hostname=p.host) as tls:
                # with TLS 1.3 a refused client certificate shows only once data flows
                tls.sendall(b"AMQP\x00\x00\x09\x01")
                tls.recv(1)
        except ssl.SSLCertVerificationError as exc:
            return TlsError(
                f"TLS: the broker's certificate at {p.host}:{p.port} is not trusted ({exc.verify_message or exc})",
                "check broker.tls_ca (the CA that signed the broker's certificate) and that "
                "the certificate names this address",
            )
        except (ssl.SSLError, OSError) as exc:
            return TlsError(
                f"TLS handshake with the broker at {p.host}:{p.port} failed ({exc})",
                "check broker.tls_cert / broker.tls_key (a client certificate the broker "
                "accepts) and the broker's TLS listener",
            )
        finally:
            raw.close()
    return found
