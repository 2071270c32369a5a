"""bridge's OpenCode plugin: deliver messages to OpenCode sessions over its HTTP API."""

__version__ = "0.1.0"
