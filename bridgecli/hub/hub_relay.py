"""The hub's roster relay (docs/roster.md#the-roster-relay): a thread of the registrar process,
as broker user :data:`~bridgecli.relay_frames.RELAY_USER` with a new random password at each
registrar start, granted :func:`bridgecli.hub.permissions.for_relay` through the management
API the registrar already uses. It connects on loopback, as the registrar does, and judges
frames under the sender check whatever ``bridge.toml`` says.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

from bridgecli.hub import permissions
from bridgecli.relay_frames import RELAY_USER

if TYPE_CHECKING:
    from bridgecli.config import Config

logger = logging.getLogger("bridgecli.hub.registrar")


class Grants(Protocol):
    """What creating the relay's user needs of the management API (``RabbitAdmin``)."""

    def put_user(self, name: str, password: str, tags: str = "") -> None: ...
    def set_permissions(self, user: str, configure: str, write: str, read: str) -> None: ...
    def set_topic_permissions(self, user: str, exchange: str, write: str, read: str) -> None: ...


#: seconds between two attempts to create the relay's user (the management API may be late)
RETRY_SECONDS = 5.0


def grant_relay(admin: Grants, name: str) -> str:
    """(Re)create :data:`RELAY_USER` with a fresh random password and relay ``name``'s
    permissions; returns the password."""
    password = secrets.token_urlsafe(32)
    admin.put_user(RELAY_USER, password)
    perms = permissions.for_relay(name)
    admin.set_permissions(RELAY_USER, perms.configure, perms.write, perms.read)
    for exchange, write, read in perms.topics():
        admin.set_topic_permissions(RELAY_USER, exchange, write, read)
    return password


def relay_config(base: Config, amqp_port: int, password: str) -> Config:
    """``base`` with ``broker.uri`` naming the relay user on the node's loopback port."""
    uri = f"amqp://{quote(RELAY_USER, safe='')}:{quote(password, safe='')}@127.0.0.1:{amqp_port}/"
    return dataclasses.replace(base, values={**base.values, "broker.uri": uri})


def start(admin: Grants, name: str, amqp_port: int, base: Config, stop: threading.Event) -> threading.Thread:
    """Run the hub's relay ``name`` on a daemon thread until ``stop``: grant its user (again
    every :data:`RETRY_SECONDS` while the management API refuses), then serve."""

    def run() -> None:
        from bridgecli.gateway.identity import IdentityPolicy
        from bridgecli.relay.service import RelayService

        while not stop.is_set():
            try:
                password = grant_relay(admin, name)
                break
            except Exception as exc:  # the management API not up yet, or refusing: try again
                logger.warning("could not create the relay's broker user: %s", exc)
                stop.wait(RETRY_SECONDS)
        else:
            return
        # joined hosts publish as their own users: the hub's relay always checks senders
        policy = dataclasses.replace(IdentityPolicy.from_config(base.values), mode="host")
        RelayService(relay_config(base, amqp_port, password), name, policy=policy).run(stop)

    thread = threading.Thread(target=run, name="hub-relay", daemon=True)
    thread.start()
    return thread
