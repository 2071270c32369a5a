"""What the hub's operator does: invite a host, list and revoke invites, list and revoke hosts.

Each runs on the hub machine against the hub database and the node's management API; the
registrar (a separate process) sees the same database. An invite is an enrolment user in
the broker whose password is the invite's secret: RabbitMQ keeps only a salted hash of it,
and the hub keeps none.
"""

from __future__ import annotations

import time
from typing import Any

from bridgecli.config import HOST_ID_RE
from bridgecli.errors import ConfigError, Conflict, NotFound
from bridgecli.hub import invite as invite_mod
from bridgecli.hub import layout
from bridgecli.hub.hub_store import HubStore
from bridgecli.hub.layout import LOCAL_USER, HubSettings
from bridgecli.hub.rabbitadmin import RabbitAdmin
from bridgecli.hub.registrar import check_host_tag

DEFAULT_EXPIRY = 3600.0


def running_hub() -> HubSettings:
    """The settings of the hub running on this machine, or a NotFound saying to start it."""
    settings = layout.load()
    if settings is None or not settings.active:
        raise NotFound("no hub runs on this machine", "start it with `bridge hub start --listen ADDR`")
    return settings


def _open() -> tuple[HubSettings, HubStore, RabbitAdmin]:
    settings = running_hub()
    return settings, HubStore(layout.db_path()), RabbitAdmin(settings.management_port)


def create_invite(host: str, expires_in: float = DEFAULT_EXPIRY, replace: bool = False) -> dict[str, Any]:
    """A new one-time invite for ``host``; returns its line and its record."""
    if not HOST_ID_RE.match(host) or host == LOCAL_USER or host.startswith(invite_mod.ENROL_USER_PREFIX):
        raise ConfigError(
            f"bad host id {host!r}", "use 1-63 characters from a-z 0-9 _ -, the id the new host will have"
        )
    if expires_in <= 0:
        raise ConfigError("an invite must expire in the future", "give --expires like 30m or 2h")
    settings, store, admin = _open()
    try:
        if host == settings.host_id:
            raise Conflict(f"{host!r} is this hub machine's own host id", "invite the other machine by its own id")
        check_host_tag(store, host, settings.host_id)
        existing = store.host(host)
        if existing and existing.revoked is None and not replace:
            raise Conflict(
                f"host {host!r} has already joined this hub",
                f"re-issue with `bridge hub invite {host} --replace` (its old credential stops working)",
            )
        line = invite_mod.issue(settings, store, admin, host, expires_in, replace=replace)
        return {
            "invite": line.encode(),
            "id": line.invite_id,
            "host": host,
            "expires": line.expires,
            "addresses": list(line.addresses),
        }
    finally:
        store.close()


def list_invites() -> list[dict[str, Any]]:
    """Every invite with its state (open, used, revoked, expired), oldest first."""
    _, store, _ = _open()
    try:
        now = time.time()
        return [
            {
                "id": r.invite_id,
                "host": r.host,
                "created": r.created,
                "expires": r.expires,
                "state": r.state(now),
                "replace": r.replace,
            }
            for r in store.invites()
        ]
    finally:
        store.close()


def revoke_invite(invite_id: str) -> None:
    """Make an open invite unusable at once (its enrolment user is deleted)."""
    _, store, admin = _open()
    try:
        if not store.revoke_invite(invite_id):
            record = store.invite(invite_id)
            if record is None:
                raise NotFound(f"no invite {invite_id}", "list them with `bridge hub invites`")
            raise Conflict(f"invite {invite_id} is already {record.state(time.time())}", "nothing to revoke")
        admin.delete_user(invite_mod.ENROL_USER_PREFIX + invite_id)
    finally:
        store.close()


def list_hosts() -> list[dict[str, Any]]:
    """Joined (and revoked) hosts: when they joined, whether a gateway is connected, their gids."""
    settings, store, admin = _open()
    try:
        connected: dict[str, int] = {}
        for conn in admin.connections():
            if str(conn.get("client_properties", {}).get("connection_name", "")).startswith("bridge-gateway-"):
                connected[conn.get("user", "")] = connected.get(conn.get("user", ""), 0) + 1
        rows = [
            {
                "host": settings.host_id,
                "user": LOCAL_USER,
                "hub": True,
                "joined": None,
                "revoked": None,
                "gateway_connected": connected.get(LOCAL_USER, 0) > 0,
                "entities": [{"gid": g, "label": lbl} for g, lbl in store.gids_of(settings.host_id)],
            }
        ]
        for host in store.hosts():
            if host.revoked is None:  # the statistics behind connections() lag; this does not
                connected[host.user] = len(admin.live_connections(host.user))
            rows.append(
                {
                    "host": host.host,
                    "user": host.user,
                    "hub": False,
                    "joined": host.joined,
                    "revoked": host.revoked,
                    "gateway_connected": host.revoked is None and connected.get(host.user, 0) > 0,
                    "entities": [{"gid": g, "label": lbl} for g, lbl in store.gids_of(host.host)],
                }
            )
        return rows
    finally:
        store.close()


def revoke_host(host: str) -> dict[str, Any]:
    """Cut ``host`` off: delete its broker user and close its connections now. Its inboxes
    and gid ownership stay, so messages already sent wait for a re-join and no other host
    can take its gids over."""
    _, store, admin = _open()
    try:
        record = store.host(host)
        if record is None or record.revoked is not None:
            raise NotFound(f"host {host!r} is not joined to this hub", "list them with `bridge hub hosts`")
        store.revoke_host(host)
        live = admin.live_connections(record.user)
        admin.delete_user(record.user)  # the broker closes the user's connections at once
        for conn in admin.live_connections(record.user):
            admin.close_connection(conn["name"], f"bridge hub revoked host {host}")
        closed = len(live)
        return {"host": host, "connections_closed": closed, "gids_kept": len(store.gids_of(host))}
    finally:
        store.close()
