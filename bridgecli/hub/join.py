"""``bridge join INVITE``: trust the invite's CA only, trade the one-time secret for this
host's own broker user, and write the configuration that makes every command use it.

The long-lived password is made here and sent only inside the TLS connection whose
certificate the invite's CA vouches for; it is never printed. Each failure a user can hit
(bad invite, hub unreachable, wrong certificate, clocks apart, a gateway still running) is
its own error type and exit code.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import ssl
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bridgecli import paths
from bridgecli.amqp.uri import redact
from bridgecli.errors import (
    BridgeError,
    BrokerUnavailable,
    CannotWrite,
    ClockSkew,
    Conflict,
    InviteError,
    Timeout,
    TlsError,
)
from bridgecli.hub import invite as invite_mod
from bridgecli.hub.claims import EXCHANGE, NODE_ROUTING_KEY, REPLY_TO, ROUTING_KEY
from bridgecli.hub.layout import MAX_CLOCK_SKEW
from bridgecli.hub.pki import load_ca_pem_from_der

CONNECT_TIMEOUT = 5.0
ANSWER_TIMEOUT = 15.0


@dataclass
class Joined:
    hub: str
    host: str
    address: str
    config_file: Path
    ca_file: Path
    ca_fingerprint: str


def tls_dir(hub: str) -> Path:
    """Where this host keeps the hub's CA: ``<config dir>/hubs/<hub>`` (0700)."""
    return paths.config_dir() / "hubs" / hub


def tls_context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def check_address(address: str, context: ssl.SSLContext, fingerprint: str) -> tuple[str, int]:
    """Reach ``address`` and check its certificate against the invite's CA, so that the
    secret is only ever sent to the hub the invite names."""
    host, port = invite_mod.split_address(address)
    try:
        raw = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
    except OSError as exc:
        raise BrokerUnavailable(
            f"cannot reach the hub at {host}:{port} ({exc.strerror or exc})",
            f"check that `bridge hub start` runs there, the address, and any firewall between the hosts (TCP {port})",
        ) from None
    try:
        with context.wrap_socket(raw, server_hostname=host):
            pass
    except ssl.SSLCertVerificationError as exc:
        reason = exc.verify_message or str(exc)
        if "not yet valid" in reason or "expired" in reason:
            raise ClockSkew(
                f"TLS: the hub's certificate at {host}:{port} is {reason} by this host's clock",
                "set the time right on both machines (e.g. enable NTP) and join again",
            ) from None
        raise TlsError(
            f"TLS: the server at {host}:{port} is not the hub this invite is for ({reason}; "
            f"the invite trusts only CA sha256:{fingerprint[:16]}…)",
            "check the address, or ask the hub's operator for a new invite",
        ) from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsError(
            f"TLS handshake with {host}:{port} failed ({exc})",
            "is that the hub's amqps port? see `bridge hub status` on the hub",
        ) from None
    return host, port


def _existing_conflicts(invite: invite_mod.Invite, force: bool) -> None:
    from bridgecli.gateway.client import ping

    answer = ping()
    if answer is not None:
        raise Conflict(
            f"a gateway of the old configuration is running (pid {answer.get('pid', '?')})",
            "stop it first (Ctrl-C in its pane), then join again and start `bridge gateway`",
        )
    if force:
        return
    old_uri = _file_value("broker", "uri")
    if old_uri and not any(a in old_uri for a in invite.addresses):
        raise Conflict(
            f"this host already uses another broker ({redact(old_uri)})",
            "join anyway with `bridge join --force INVITE` (the old broker.uri is replaced)",
        )
    old_host = _file_value("host", "id")
    if old_host and old_host != invite.host:
        raise Conflict(
            f"this host's id is {old_host!r} but the invite is for {invite.host!r}",
            f"ask for an invite for {old_host}, or join anyway with `--force`",
        )


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(stamp))


def _file_value(section: str, key: str) -> Any:
    from bridgecli.config import read_file

    try:
        return (read_file(paths.config_file()).get(section) or {}).get(key)
    except BridgeError:
        return None


def enrol(
    host: str, port: int, context: ssl.SSLContext, invite: invite_mod.Invite, password: str, op: str = "enrol"
) -> dict[str, Any]:
    """Log in as the invite's enrolment user and ask the registrar for this host's user
    (``op`` "enrol-node": for a cluster node's secrets)."""
    import pika
    import pika.exceptions

    from bridgecli.amqp.connection import open_blocking

    params = pika.ConnectionParameters(
        host=host,
        port=port,
        credentials=pika.PlainCredentials(invite.enrol_user, invite.secret),
        ssl_options=pika.SSLOptions(context, host),
        heartbeat=0,
        socket_timeout=CONNECT_TIMEOUT,
        stack_timeout=CONNECT_TIMEOUT * 2,
        connection_attempts=1,
        client_properties={"connection_name": "bridge-join", "product": "bridgecli"},
    )
    try:
        connection = open_blocking(params)
    except pika.exceptions.ProbableAuthenticationError:
        if time.time() > invite.expires:
            raise InviteError(f"this invite expired at {_when(invite.expires)}", invite_mod.ASK_AGAIN) from None
        raise InviteError("the hub refused this invite: it was used or revoked", invite_mod.ASK_AGAIN) from None
    except pika.exceptions.AMQPError as exc:
        raise BrokerUnavailable(
            f"the hub at {host}:{port} did not complete the AMQP handshake ({type(exc).__name__})",
            "see the hub's broker log (`bridge broker logs` there)",
        ) from None
    try:
        channel = connection.channel()
        answers: list[bytes] = []
        channel.basic_consume(REPLY_TO, lambda ch, m, p, body: answers.append(body), auto_ack=True)
        request = {"op": op, "host": invite.host, "password": password, "time": time.time()}
        try:
            channel.basic_publish(
                EXCHANGE,
                NODE_ROUTING_KEY if op == "enrol-node" else ROUTING_KEY,
                json.dumps(request).encode(),
                pika.BasicProperties(
                    reply_to=REPLY_TO,
                    correlation_id=str(uuid.uuid4()),
                    user_id=invite.enrol_user,
                    content_type="application/json",
                    expiration=str(int(ANSWER_TIMEOUT * 1000)),
                ),
            )
            deadline = time.monotonic() + ANSWER_TIMEOUT
            while not answers and time.monotonic() < deadline:
                connection.process_data_events(time_limit=0.2)
        except pika.exceptions.ChannelClosedByBroker as exc:
            raise BrokerUnavailable(
                f"the hub's broker refused the enrolment ({exc.reply_text})",
                "is the hub's registrar running? `bridge hub status` on the hub",
            ) from None
        except pika.exceptions.ConnectionClosedByBroker as exc:
            raise InviteError(
                f"the hub closed the enrolment connection ({exc.reply_text})", invite_mod.ASK_AGAIN
            ) from None
        if not answers:
            raise Timeout(
                f"the hub's registrar did not answer within {ANSWER_TIMEOUT:g}s", "check `bridge hub status` on the hub"
            )
        answer = json.loads(answers[0])
    finally:
        if connection.is_open:
            connection.close()
    if not answer.get("ok"):
        kind, message, hint = answer.get("kind"), str(answer.get("error")), answer.get("hint") or None
        error = {"invite": InviteError, "clock": ClockSkew, "conflict": Conflict}.get(kind, BridgeError)
        raise error(f"the hub refused: {message}", hint)
    hub_time = answer.get("hubTime")
    if isinstance(hub_time, (int, float)) and abs(hub_time - time.time()) > MAX_CLOCK_SKEW:
        raise ClockSkew(
            f"this host's clock is {time.time() - hub_time:+.0f}s off the hub's",
            "set the time right on both machines (e.g. enable NTP)",
        )
    return answer


def write_ca(invite: invite_mod.Invite) -> Path:
    directory = paths.ensure_private_dir(tls_dir(invite.hub))
    path = directory / "ca.pem"
    tmp = path.with_suffix(".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "wb") as handle:
            handle.write(load_ca_pem_from_der(invite.ca_der))
        tmp.replace(path)
    except OSError as exc:
        raise CannotWrite(f"cannot write {path}: {exc.strerror}", "check the config directory") from None
    return path


def reach(invite: invite_mod.Invite) -> tuple[str, int, ssl.SSLContext]:
    """The first of the invite's addresses that answers with a certificate of its CA:
    (host, port, the TLS context that trusts only that CA). InviteError when expired."""
    if time.time() > invite.expires + MAX_CLOCK_SKEW:
        raise InviteError(f"this invite expired at {_when(invite.expires)}", invite_mod.ASK_AGAIN)
    try:
        context = tls_context(load_ca_pem_from_der(invite.ca_der))
    except (ValueError, ssl.SSLError):
        raise InviteError("malformed invite (its CA certificate does not load)", invite_mod.ASK_AGAIN) from None
    problems: list[BridgeError] = []
    for address in invite.addresses:
        try:
            host, port = check_address(address, context, invite.ca_fingerprint)
            return host, port, context
        except BrokerUnavailable as exc:
            problems.append(exc)
    raise (
        problems[0]
        if len(problems) == 1
        else BrokerUnavailable(
            "cannot reach the hub at any of its addresses: " + "; ".join(p.message for p in problems),
            problems[0].hint,
        )
    )


def join(text: str, force: bool = False) -> Joined:
    """The whole join: check, reach, verify, enrol, write ``bridge.toml``."""
    from bridgecli.config_edit import set_values

    invite = invite_mod.decode(text)
    if invite.kind != "host":
        raise InviteError("this is an invite for a cluster node", "join it with `bridge join --node INVITE`")
    _existing_conflicts(invite, force)
    host, port, context = reach(invite)
    password = secrets.token_urlsafe(32)
    answer = enrol(host, port, context, invite, password)
    ca_file = write_ca(invite)
    shown = f"[{host}]" if ":" in host else host
    # a cluster hub: every node's address after the one reached (the gateway fails over)
    others = [a for a in answer.get("brokers") or [] if isinstance(a, str) and a != f"{shown}:{port}"]
    login = f"{quote(answer['user'], safe='')}:{password}"
    values = {
        "broker.uri": ",".join(f"amqps://{login}@{a}/" for a in [f"{shown}:{port}", *others]),
        "broker.tls_ca": str(ca_file),
        "hub.id": invite.hub,
        "host.id": invite.host,
        # the hub machine publishes as the user named after its host id, which the
        # check expects anyway: no user needs to be trusted to claim another host
        "security.sender_check": "host",
    }
    if answer.get("cluster"):
        values["messaging.inbox_queue_type"] = "quorum"
    set_values(values)
    return Joined(
        hub=invite.hub,
        host=invite.host,
        address=f"{shown}:{port}",
        config_file=paths.config_file(),
        ca_file=ca_file,
        ca_fingerprint=invite.ca_fingerprint,
    )
