"""The keys of ``[plugins.codex]`` and of profiles with ``launcher = "codex"``, declared so
that ``bridge config set`` can check them (the README documents each)."""

from __future__ import annotations

from bridgecli.config import Setting, non_negative
from bridgecli_codex.backend import CodexSettings
from bridgecli_codex.launcher import DEFAULT_TUI_SESSION

PLUGIN_SETTINGS = (
    Setting(
        "timeout",
        float,
        CodexSettings.timeout,
        "Seconds to wait for the app-server to connect and answer a request.",
        check=non_negative,
    ),
    Setting(
        "confirm_timeout",
        float,
        CodexSettings.confirm_timeout,
        "Seconds to wait for a delivered message to show in its turn.",
        check=non_negative,
    ),
    Setting(
        "max_inline_bytes",
        int,
        CodexSettings.max_bytes,
        "Content shown inline is cut at this many bytes.",
        check=non_negative,
    ),
    Setting(
        "max_inline_lines",
        int,
        CodexSettings.max_lines,
        "Content shown inline is cut at this many lines.",
        check=non_negative,
    ),
    Setting(
        "tmux_socket",
        str,
        None,
        "Launcher: tmux socket for the TUI window (path if it contains /, else a name); "
        "default BRIDGE_TMUX_SOCKET, else tmux's default server.",
    ),
)

PROFILE_SETTINGS = (
    Setting(
        "codex_tui",
        str,
        "none",
        "tmux: open the Codex TUI attached to the new thread in a tmux window.",
        choices=("none", "tmux"),
    ),
    Setting("codex_tui_session", str, DEFAULT_TUI_SESSION, "tmux session for the TUI window (created if missing)."),
)
