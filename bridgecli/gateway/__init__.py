"""The per-host gateway: the only AMQP client on a host (docs/design.md#invariant-1)."""
