"""``bridge mcp``: the stdio MCP server through which a main or orchestrator session pulls
its messages (seed invariant 3: "the final hop is a pull for MCP clients").

Module map (each module does one thing):

* :mod:`~bridgecli.mcp.link` — the server's only way to the gateway: the local socket API,
  called off the event loop; registering/re-attaching the session's hold-backend entity.
* :mod:`~bridgecli.mcp.tools` — a protocol-free tool registry (name, description, JSON
  schema, async handler); turns BridgeErrors into one-line tool errors.
* :mod:`~bridgecli.mcp.messaging_tools` — the ``bridge_*`` tools.
* :mod:`~bridgecli.mcp.render` — how messages read to a model (framed, untrusted text).
* :mod:`~bridgecli.mcp.push` — the inbox watcher: arrival notifications and the nudge.
* :mod:`~bridgecli.mcp.server` — glue onto the official MCP SDK (low-level ``Server``).

Only :mod:`~bridgecli.mcp.server` imports the ``mcp`` SDK, and only ``bridge mcp`` imports
it, so ``bridge --help`` never pays for it. Tool sets are functions ``(registry, link)`` that
add tools and may return background tasks (:data:`bridgecli.mcp.server.ToolSet`), so browser
tools (issue 11) can join without touching the messaging ones.
"""
