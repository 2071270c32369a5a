"""The ``hold`` backend: keep messages on the host until the entity pulls them.

Delivering = writing the message into the host's store as *held*, in the same transaction
as its dedup record; the gateway acks the broker right after. Holding therefore survives a
gateway restart and can last far longer than RabbitMQ's ``consumer_timeout`` (which would
close a channel that kept a delivery unacked). ``bridge poll`` / the MCP server drain it;
when a local ``poll --wait`` or ``send --wait`` is already waiting for the message, the
gateway records it as taken in that same write instead (``Burst.hand_off``).
"""

from __future__ import annotations

from bridgecli.envelope import Envelope
from bridgecli.errors import ConfigError, DeliveryError
from bridgecli.hoststate.store import HELD, Store, default_path
from bridgecli.hoststate.transaction import Transaction
from bridgecli.interfaces import BackendContext, BackendTraits, Entity


class HoldBackend:
    """Consume-and-hold: the final hop is a pull. Records through ``context.store`` (the
    gateway's, its write joining the transaction the gateway passes), else a store of its own."""

    inline = True  # one local SQLite commit: safe on the AMQP thread
    #: deliver() writes the dedup record itself (same transaction); waiters may take at once
    traits = BackendTraits(inline=True, records_itself=True, pulled=True, delivered_how="held")

    def __init__(self, context: BackendContext, store: Store | None = None) -> None:
        self.store = store or context.store or Store(default_path(), context.config.values["messaging.dedup_window"])

    def check_address(self, address: str | None) -> None:
        if address:
            raise ConfigError(f"the hold backend takes no address (got {address!r})", "use --deliver hold")

    def deliver(self, entity: Entity, envelope: Envelope, tx: Transaction | None = None) -> None:
        self.record(envelope, HELD, tx=tx)

    def record(
        self, envelope: Envelope, state: str, received: float | None = None, tx: Transaction | None = None
    ) -> bool:
        """Write the message (and its dedup record) as ``state``: ``held``, or ``drained`` when
        the gateway hands it to a waiting local call at once. False for a duplicate."""
        try:
            return self.store.record(envelope, state, received=received, tx=tx)
        except Exception as exc:  # sqlite full/locked: retryable
            raise DeliveryError(
                f"cannot hold message {envelope.msg_id}: {exc}", "check free space in the state dir"
            ) from exc

    def status(self, entity: Entity) -> str:
        return "idle"
