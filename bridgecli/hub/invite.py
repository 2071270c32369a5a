"""The one-line invite a hub prints for a joining host, and its parsing.

``bridge-invite:1.<payload>.<ca>``: ``payload`` is base64url JSON (hub id, host id, broker
addresses, invite id, one-time secret, expiry); ``ca`` is the hub CA's DER, base64url. The CA
travels in the invite so that the joining host trusts exactly that CA from its first byte on
the wire: there is no trust-on-first-use step to attack. Pure: no network, no files.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from bridgecli.errors import InviteError

PREFIX = "bridge-invite:"
VERSION = "1"
#: the RabbitMQ user an invite's secret logs in as (deleted when the invite is used)
ENROL_USER_PREFIX = "bridge-enrol-"
_ID_RE = re.compile(r"^[0-9a-f]{12}$")
ASK_AGAIN = "ask the hub's operator for a new one: `bridge hub invite HOSTID`"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Invite:
    """What a joining host needs: where the hub is, which CA to trust, and the secret."""

    hub: str
    host: str
    addresses: tuple[str, ...]  # "ADDR:PORT" of the hub's TLS listeners
    invite_id: str
    secret: str
    expires: float  # Unix time
    ca_der: bytes
    kind: str = "host"  # "node": for `bridge join --node`, a new cluster node named ``host``

    @property
    def enrol_user(self) -> str:
        return ENROL_USER_PREFIX + self.invite_id

    @property
    def ca_fingerprint(self) -> str:
        return hashlib.sha256(self.ca_der).hexdigest()

    def encode(self) -> str:
        """The single line ``bridge hub invite`` prints."""
        payload = {
            "hub": self.hub,
            "host": self.host,
            "addrs": list(self.addresses),
            "id": self.invite_id,
            "secret": self.secret,
            "exp": int(self.expires),
        }
        if self.kind != "host":
            payload["kind"] = self.kind
        body = json.dumps(payload, separators=(",", ":")).encode()
        return f"{PREFIX}{VERSION}.{_b64(body)}.{_b64(self.ca_der)}"


def new_id() -> str:
    """A fresh invite id (12 hex digits: unique enough per hub, short in listings)."""
    return secrets.token_hex(6)


def new_secret() -> str:
    """A fresh one-time enrolment secret (192 bits)."""
    return secrets.token_urlsafe(24)


def decode(text: str) -> Invite:
    """Parse an invite line; raise :class:`InviteError` naming what is wrong with it."""
    text = text.strip().strip("'\"")
    if not text.startswith(PREFIX):
        raise InviteError(
            f"not a bridge invite (it should start with {PREFIX!r})",
            "paste the whole line `bridge hub invite` printed, in quotes",
        )
    parts = text[len(PREFIX) :].split(".")
    if len(parts) != 3 or parts[0] != VERSION:
        raise InviteError(
            "malformed invite (wrong number of parts or unknown version)",
            "paste the whole line, in quotes; " + ASK_AGAIN,
        )
    try:
        payload = json.loads(_unb64(parts[1]))
        ca_der = _unb64(parts[2])
        invite = Invite(
            hub=str(payload["hub"]),
            host=str(payload["host"]),
            addresses=tuple(str(a) for a in payload["addrs"]),
            invite_id=str(payload["id"]),
            secret=str(payload["secret"]),
            expires=float(payload["exp"]),
            ca_der=ca_der,
            kind=str(payload.get("kind", "host")),
        )
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise InviteError(
            "malformed invite (it does not decode: truncated or altered?)",
            "paste the whole line, in quotes; " + ASK_AGAIN,
        ) from None
    if (
        not _ID_RE.match(invite.invite_id)
        or not invite.addresses
        or not invite.secret
        or not ca_der.startswith(b"\x30")
        or invite.kind not in ("host", "node")
    ):
        raise InviteError("malformed invite (a field is missing or invalid)", ASK_AGAIN)
    for address in invite.addresses:
        split_address(address)
    return invite


def split_address(address: str) -> tuple[str, int]:
    """``"10.0.0.1:5671"`` / ``"[::1]:5671"`` / ``"hub.example:5671"`` → (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise InviteError(f"malformed invite (bad address {address!r})", ASK_AGAIN)
    return host.strip("[]"), int(port)


def issue(
    settings: Any,
    store: Any,
    admin: Any,
    host: str,
    expires_in: float,
    *,
    replace: bool = False,
    kind: str = "host",
    address: str | None = None,
) -> Invite:
    """On the hub: make, grant and record one invite of ``kind`` for ``host``: its enrolment
    user (the secret as password, through ``admin``) and its row in ``store``. One path for
    host and node invites."""
    from bridgecli.hub import layout, permissions
    from bridgecli.hub.pki import HubPki

    # on a cluster hub every node can answer the join (each runs a registrar)
    nodes = [n.address for n in store.nodes()] if settings.cluster else []
    line = Invite(
        hub=settings.hub_id,
        host=host,
        addresses=tuple(dict.fromkeys([*settings.addresses, *nodes])),
        invite_id=new_id(),
        secret=new_secret(),
        expires=time.time() + expires_in,
        ca_der=HubPki(layout.pki_dir()).ca_der(),
        kind=kind,
    )
    admin.put_user(line.enrol_user, line.secret)
    admin.set_permissions(line.enrol_user, *permissions.ENROL_PERMISSIONS)
    store.add_invite(line.invite_id, host, line.expires, replace, kind=kind, address=address)
    return line
