"""Everything AMQP: broker URI resolution, topology as data, connections, publishing.

Modules here that import pika are imported only by commands that talk to the broker, never
on the ``bridge --help`` / ``--version`` path.
"""
