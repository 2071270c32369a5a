"""Host-local state shared by the gateway daemon and the CLI: the entity registry
(:mod:`.entities`) and the message store (:mod:`.store`).

A package of its own because both sides open the same files: the daemon while it runs, the
CLI's direct path when no gateway does. Neither module imports pika or click.
"""
