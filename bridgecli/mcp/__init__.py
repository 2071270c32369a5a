"""``bridge mcp``: the stdio MCP server through which a main or orchestrator pulls its messages.

The final hop is a pull: docs/design.md#invariant-3. Modules: :mod:`~bridgecli.mcp.link`
(the gateway socket, off the event loop; the session's hold entity), :mod:`~bridgecli.mcp.tools`
(a protocol-free tool registry), :mod:`~bridgecli.mcp.messaging_tools` and
:mod:`~bridgecli.mcp.browser_tools` (the tools), :mod:`~bridgecli.mcp.render` (how messages
read to a model), :mod:`~bridgecli.mcp.push` (notifications and the nudge),
:mod:`~bridgecli.mcp.server` (SDK glue; the only importer of ``mcp``, so ``bridge --help``
never pays for it). A tool set is a function ``(registry, link)`` that adds tools and may
return background tasks.
"""
