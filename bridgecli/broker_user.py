"""The AMQP user this host publishes as, from the broker URIs it connects with.

A publish carries it as ``user_id`` so the broker vouches for the sender's host (see
``bridgecli.gateway.identity``). It is read from the URIs we connect with rather than from
the open connection, whose parameters pika keeps private.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridgecli.config import Config


def broker_user(config: Config) -> str | None:
    """The user every configured broker URI names (pika's default ``guest`` for none); None
    when they name different users, since which URI connected is then unknown (the publish
    then carries no ``user_id``, and receivers see the sender as unverified)."""
    import pika

    from bridgecli.amqp.uri import resolve_broker_uri

    users = {pika.URLParameters(uri).credentials.username for uri in resolve_broker_uri(config)}
    return users.pop() if len(users) == 1 else None
