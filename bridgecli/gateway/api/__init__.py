"""The gateway's local API: the Unix socket one-shot commands talk to, and its operations.

Everything here sees the gateway only through :class:`.contract.ApiGateway`; the daemon never
imports this package, and whoever starts a gateway builds the server and hands it over.
"""
