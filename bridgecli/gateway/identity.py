"""Sender identity: does what a host reads speak for the host it names?

``fromHost`` and ``from`` are claims; the AMQP ``user_id`` is verified by RabbitMQ, so it names
who really published (docs/design.md#invariant-10). ``fromHost = X`` must arrive with the
user of X (``security.host_user``, default the host id) or a ``security.trusted_users`` one,
and the sender gid must not belong to another host (a known host's tag, :mod:`bridgecli.gids`,
or another host's announcement). The gateway dead-letters a mismatch as ``sender_mismatch``.
``security.sender_check = off`` skips it; ``hub start`` and ``join`` turn it on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bridgecli import gids
from bridgecli.envelope import Envelope

MODES = ("off", "host")
#: the settings of the sender check, re-read by a running gateway whenever it (re)connects
KEYS = ("security.sender_check", "security.host_user", "security.trusted_users")


def reread(values: dict[str, Any]) -> bool:
    """Update the sender-check settings in ``values`` from ``bridge.toml`` and the environment
    as they are now; True when they changed. Why: ``bridge hub start`` turns the check on
    under a running gateway, which reconnects as the hub restarts its node. A file that
    cannot be read now leaves them as they were."""
    from bridgecli import config
    from bridgecli.errors import BridgeError

    try:
        fresh = config.load(allow_unknown=True).values
    except BridgeError:
        return False
    changed = any(values.get(key) != fresh[key] for key in KEYS)
    values.update({key: fresh[key] for key in KEYS})
    return changed


@dataclass(frozen=True)
class IdentityPolicy:
    """How strictly to tie ``fromHost`` to the authenticated user."""

    mode: str = "off"
    host_user: str = "{host}"
    trusted_users: frozenset[str] = frozenset()

    @classmethod
    def from_config(cls, values: dict[str, Any]) -> IdentityPolicy:
        trusted = values.get("security.trusted_users") or ""
        return cls(
            mode=values.get("security.sender_check") or "off",
            host_user=values.get("security.host_user") or "{host}",
            trusted_users=frozenset(u.strip() for u in trusted.split(",") if u.strip()),
        )

    def expected_user(self, host: str) -> str:
        """The RabbitMQ user that host ``host`` must publish as."""
        return self.host_user.replace("{host}", host)

    def speaks_for(self, user_id: str | None, host: str) -> bool:
        """May a frame published by broker user ``user_id`` speak for ``host`` (an answer, a
        control request, a roster frame)? Always, with the check off."""
        if self.mode == "off":
            return True
        return bool(user_id) and (user_id == self.expected_user(host) or user_id in self.trusted_users)


def check_sender(
    policy: IdentityPolicy,
    *,
    user_id: str | None,
    from_host: str | None,
    roster_host: str | None = None,
    sender_gid: str | None = None,
) -> str | None:
    """None when the claimed origin is acceptable, else a one-line reason for the DLQ.

    ``roster_host`` is the host the roster holds the sender gid to belong to: the known host
    whose tag it carries, or the host announcing it (None: unknown, e.g. a gid minted before
    tags whose host is offline, or no roster is running). A ``sender_gid`` minted with
    ``fromHost``'s tag needs no roster.
    """
    if policy.mode == "off":
        return None
    if not user_id:
        # RabbitMQ only validates user_id when present: a publisher can omit it, which
        # proves nothing, so under the check an anonymous claim is refused.
        return f"no authenticated user_id on a message claiming fromHost={from_host!r}"
    if user_id in policy.trusted_users:
        return None
    if not from_host:
        return f"message from user {user_id!r} names no fromHost"
    expected = policy.expected_user(from_host)
    if user_id != expected:
        return f"fromHost {from_host!r} must be published by user {expected!r}, but was published by {user_id!r}"
    if sender_gid is not None and gids.minted_on(sender_gid, from_host):
        return None
    if roster_host is not None and roster_host != from_host:
        return (
            f"sender gid is announced on host {roster_host!r} (or carries its tag), but the message claims "
            f"fromHost {from_host!r} (user {user_id!r})"
        )
    return None


def verify(values: dict[str, Any], envelope: Envelope, roster: Any = None) -> str | None:
    """:func:`check_sender` for a received envelope, with the policy from config ``values``
    and the sender gid's host looked up in ``roster`` (a ``RosterView``: its ``owner(gid)``;
    or anything with ``get(gid) -> entry.host``)."""
    policy = IdentityPolicy.from_config(values)
    if policy.mode == "off":
        return None
    roster_host = None
    if roster is not None:
        try:
            owner = getattr(roster, "owner", None)
            if owner is not None:
                roster_host = owner(envelope.sender)
            else:
                entry = roster.get(envelope.sender)
                roster_host = getattr(entry, "host", None) if entry is not None else None
        except Exception:  # the roster is advisory here; never fail a delivery on it
            roster_host = None
    return check_sender(
        policy,
        user_id=envelope.user_id,
        from_host=envelope.sender_host,
        roster_host=roster_host,
        sender_gid=envelope.sender,
    )
