"""bridge's tmux plugin: deliver messages into tmux panes and launch agents in new windows."""

__version__ = "0.1.0"
