"""The browser bridge: a role-aware WebSocket broker between agents and browsers.

Module map (each does one thing):

* :mod:`.frames` — wire frames, constants, validation (pure; the protocol's source of truth);
* :mod:`.broker` — routing by group ownership (pure, fed by fake connections in tests);
* :mod:`.server` — the WebSocket transport around the broker (loopback, token, Origin, limits);
* :mod:`.agent_client` — the guest agent's WebSocket client (correlation, reconnect, abort);
* :mod:`.connect` — election by bind, the uniform ``send()`` and failover;
* :mod:`.token_file` — ``bridge.json`` (port + shared token), 0600.

Nothing here is imported by ``bridge --help``; ``websockets`` is only imported by
:mod:`.server`, :mod:`.agent_client` and :mod:`.connect`.
"""
