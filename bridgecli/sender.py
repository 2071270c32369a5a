"""Who is speaking: ``--from`` / ``BRIDGE_GID`` when given; for a reply/answer, the local
entity the answered message was delivered to; else this user's default identity.

Why: a plain shell has no ``BRIDGE_GID``, yet ``bridge send TARGET msg`` should work, as
``USER@HOSTID`` (a ``hold`` entity registered on first use); and an agent in a pane
registered by hand must answer as itself. Every path (the gateway's local API, which the
fast path reaches, and the direct path) resolves the sender through :func:`named` and
:func:`resolve`, so all agree. Imports stay light: the fast path formats
:func:`registered_note` with this module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from bridgecli.errors import Conflict

if TYPE_CHECKING:
    from bridgecli.hoststate.entities import Registry
    from bridgecli.interfaces import Entity
    from bridgecli.messaging import Identity
    from bridgecli.results import Registered

#: the default identity pulls its messages with ``bridge poll``, as a main session does
ROLE, DELIVER = "main", "hold"
LABEL_MAX = 64


def user_name() -> str:
    """This process's OS user name, made fit for a label. From the uid, not ``$USER``: the
    gateway and a client of the same uid must name the same entity."""
    import pwd

    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:  # a container uid without a passwd entry
        name = ""
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", name).lstrip("_.-")
    return name or f"uid{uid}"


def default_label(host_id: str) -> str:
    """``USER@HOSTID``, the user part shortened so the label stays within 64 characters."""
    room = max(1, LABEL_MAX - len(host_id) - 1)
    return f"{user_name()[:room]}@{host_id}"[:LABEL_MAX]


def find_default(registry: Registry, label: str) -> Entity | None:
    """The default identity when it is registered. A non-hold entity under that label is
    refused, not reused: sending as it would speak for that agent, and its replies would be
    typed into its pane or command instead of waiting for ``bridge poll``."""
    entity = next((e for e in registry.all() if e.label == label), None)
    if entity is not None and entity.deliver.partition(":")[0] != DELIVER:
        raise Conflict(
            f"the default sender label {label!r} belongs to a {entity.role} entity delivered by "
            f"{entity.deliver}, not a hold identity",
            f"pass --from LABEL (or export BRIDGE_GID=<gid>), or `bridge unregister {label}` to free the name",
        )
    return entity


def named(given: str | None, delivered_to: str | None, registry: Registry) -> str | None:
    """The sender a request names: ``given`` (``--from`` / ``BRIDGE_GID``) when set, else the
    gid ``delivered_to`` — the recipient recorded in this host's store for the message a
    reply/answer answers — while it is an entity registered here; else None (the default
    identity). Only a local entity that received that message here can be chosen this way."""
    if given:
        return given
    if delivered_to and registry.get(delivered_to) is not None:
        return delivered_to
    return None


def resolve(
    registry: Registry, given: str | None, *, host_id: str, register: Callable[..., Entity]
) -> tuple[Identity, Entity | None]:
    """The sender, and the entity when it was registered just now (else None).

    ``given`` (a gid or local label from ``--from`` / ``BRIDGE_GID``, read by the client: the
    gateway's own environment says nothing about who calls it) wins. Without it the default
    identity is looked up by label, else registered through ``register(label=, role=,
    deliver=)`` — the path's own registration, which also serves or declares its inbox. Two
    first uses at once: the registry refuses the second label atomically, and the loser
    speaks as the winner's entity."""
    from bridgecli.messaging import Identity, sender_identity

    if given:
        return sender_identity(registry, given), None
    label = default_label(host_id)
    entity = find_default(registry, label)
    created = None
    if entity is None:
        try:
            entity = created = register(label=label, role=ROLE, deliver=DELIVER)
        except Conflict:
            entity = find_default(registry, label)
            if entity is None:
                raise
    return Identity(entity.gid, entity.label), created


def registered_note(registered: Registered, command: str) -> str:
    """The one stderr line saying a default identity was registered for this ``command``."""
    doing = "polling" if command == "poll" else "sending"
    return (
        f"bridge: {doing} as {registered.label} (gid {registered.gid}), registered now; read replies with `bridge poll`"
    )
