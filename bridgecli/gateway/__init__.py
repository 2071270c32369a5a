"""The per-host gateway: the only AMQP consumer on a host (seed §2, §8)."""
