"""Registering an entity: validate its delivery spec against the installed backends, then
store it. Shared by the gateway's local API and the CLI's direct path."""

from __future__ import annotations

import logging
from typing import Any

from bridgecli.config import Config
from bridgecli.hoststate.entities import Registry, check_deliver, validate_label, validate_role
from bridgecli.interfaces import BackendContext, Entity


def check_backend(plugins: Any, config: Config, deliver: str) -> None:
    """Raise a clear error if ``BACKEND[:ADDRESS]`` names no installed backend or a bad address."""
    from bridgecli.hoststate.store import default_path

    backend_name, address = check_deliver(deliver)
    factory = plugins.provider("backends", backend_name)
    backend = factory(BackendContext(config=config, state_dir=default_path().parent, host_id=config.host_id))
    backend.check_address(address)


def register(
    registry: Registry,
    plugins: Any,
    config: Config,
    *,
    label: str,
    role: str,
    deliver: str,
    gid: str | None = None,
    launcher: str | None = None,
    launch_data: dict | None = None,
    grants: Any = None,
) -> Entity:
    """Validate and store a new entity; with ``grants`` (a hub's claimer) also own its gid at
    the hub, so that its inbox may be declared. Nothing is stored when the hub refuses."""
    validate_label(label)
    validate_role(role)
    check_backend(plugins, config, deliver)
    entity = registry.add(
        label=label,
        role=role,
        deliver=deliver,
        host=config.host_id,
        gid=gid,
        launcher=launcher,
        launch_data=launch_data,
    )
    if grants is not None:
        try:
            grants.claim([entity])
        except BaseException:
            registry.remove(entity.gid)
            raise
    return entity


def reclaim(grants: Any, entities: list[Entity]) -> None:
    """Re-own every entity's gid at the hub before its inbox is declared (idempotent; covers
    entities registered while the hub was away). A refusal is logged, not fatal: the
    inboxes the broker already grants keep working. Also learns, in the background, the
    cluster nodes added since this host joined (:mod:`bridgecli.gateway.broker_nodes`)."""
    from bridgecli.errors import BridgeError
    from bridgecli.gateway import broker_nodes
    from bridgecli.gateway import log as glog

    broker_nodes.learn_in_background(grants)
    if grants is None or not entities:
        return
    try:
        grants.claim(entities)
    except BridgeError as exc:
        glog.event(
            logging.getLogger("bridgecli.gateway"),
            "hub refused or did not answer a grant claim",
            logging.WARNING,
            error=str(exc),
        )


def release(grants: Any, entity: Entity) -> None:
    """Give an unregistered entity's grant back to the hub (best effort: a grant left
    behind only names an inbox that no longer exists)."""
    if grants is None:
        return
    try:
        grants.release([entity.gid])
    except Exception as exc:
        logging.getLogger("bridgecli.gateway").warning("could not give gid %s back to the hub: %s", entity.gid, exc)
