"""bridge's herdr plugin: deliver messages to agents in herdr panes, launch agents there."""

__version__ = "0.1.0"
