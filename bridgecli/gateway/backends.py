"""The gateway's delivery backends: one instance per backend name, built from its plugin's
factory, and the one way a message is handed to any of them.

Why here: every path (inline on the I/O thread, a worker thread) delivers through
:meth:`Backends.deliver`, so staging, the dedup record and error mapping follow the backend's
declared :class:`~bridgecli.interfaces.BackendTraits` alike everywhere.
"""

from __future__ import annotations

from typing import Any, cast

from bridgecli.config import Config
from bridgecli.envelope import Envelope
from bridgecli.errors import BridgeError, DeliveryError
from bridgecli.hoststate.store import DELIVERED, Store
from bridgecli.hoststate.transaction import Transaction
from bridgecli.interfaces import (
    BackendContext,
    BackendTraits,
    Delivered,
    DeliveryBackend,
    Entity,
    RecordingBackend,
    traits_of,
)


class Backends:
    """Backends by name (created on first use). Not locked: the I/O thread creates them
    (attach) before any worker or status thread asks for the same name."""

    def __init__(self, config: Config, host: str, plugins: Any, store: Store) -> None:
        self.config = config
        self.host = host
        self.plugins = plugins
        self.store = store
        self._backends: dict[str, tuple[DeliveryBackend, BackendTraits]] = {}

    def _entry(self, entity: Entity) -> tuple[DeliveryBackend, BackendTraits]:
        entry = self._backends.get(entity.backend)
        if entry is None:
            factory = self.plugins.provider("backends", entity.backend)
            backend = factory(
                BackendContext(
                    config=self.config, state_dir=self.store.path.parent, host_id=self.host, store=self.store
                )
            )
            entry = self._backends[entity.backend] = (backend, traits_of(backend))
        return entry

    def for_entity(self, entity: Entity) -> DeliveryBackend:
        """The backend of ``entity`` (raises a BridgeError when its plugin is missing)."""
        return self._entry(entity)[0]

    def traits(self, entity: Entity) -> BackendTraits:
        return self._entry(entity)[1]

    def deliver(
        self,
        entity: Entity,
        backend: DeliveryBackend,
        envelope: Envelope,
        tx: Transaction | None = None,
        traits: BackendTraits | None = None,
    ) -> Delivered:
        """Hand one message to ``backend`` and write its dedup record (unless the backend
        records it itself), in ``tx`` when given; any failure comes out as a DeliveryError.
        ``traits``: the backend's, when the caller has them already. Returns how it was
        delivered: what the backend said, else its traits' ``delivered_how``."""
        if traits is None:
            traits = self.traits(entity)  # ``backend`` is this entity's: its traits are cached
        if traits.stage:
            self.store.stage(envelope, tx=tx)  # visible to `bridge reply` while the backend runs
        try:
            if traits.records_itself:
                outcome = cast(RecordingBackend, backend).deliver(entity, envelope, tx=tx)  # records in tx
            else:
                outcome = backend.deliver(entity, envelope)
        except DeliveryError:
            raise
        except BridgeError as exc:
            raise DeliveryError(str(exc)) from exc
        except Exception as exc:  # a plugin bug must not kill the gateway
            raise DeliveryError(f"backend {entity.backend} raised {type(exc).__name__}: {exc}") from exc
        if not traits.records_itself:
            self.store.record(envelope, DELIVERED, tx=tx)
        return outcome if isinstance(outcome, Delivered) else Delivered(how=traits.delivered_how)
