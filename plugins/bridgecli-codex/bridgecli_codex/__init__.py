"""bridge's Codex plugin: deliver messages as turns through ``codex app-server`` and launch one."""

__version__ = "0.1.0"
