"""bridgecli-webhook: an example third-party bridge plugin (see docs/writing-plugins.md).

``--deliver webhook:URL`` POSTs each message's envelope JSON to URL; ``bridge webhook-test
URL`` checks an endpoint the same way. Importing this package imports nothing else.
"""

__version__ = "0.1.0"
