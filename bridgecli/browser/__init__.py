"""The browser bridge: a role-aware WebSocket broker between agents and browsers.

Modules: :mod:`.frames` (wire frames, constants, validation; pure, the protocol's source of
truth), :mod:`.broker` (routing by group ownership; pure), :mod:`.server` (the WebSocket
transport: loopback, token, Origin, limits), :mod:`.agent_client` (the guest agent's client),
:mod:`.connect` (election by bind, the uniform ``send()``, failover), :mod:`.token_file`
(``bridge.json``: port and shared token, 0600). Rules: docs/design.md#browser-election.

``bridge --help`` imports none of this; only :mod:`.server`, :mod:`.agent_client` and
:mod:`.connect` import ``websockets``.
"""
