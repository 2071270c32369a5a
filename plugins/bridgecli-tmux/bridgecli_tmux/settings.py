"""The keys of ``[plugins.tmux]`` and of profiles with ``launcher = "tmux"``, declared so
that ``bridge config set`` can check them (the README documents each)."""

from __future__ import annotations

from bridgecli.config import Setting, non_negative, regexes
from bridgecli_tmux.backend import DEFAULT_BLOCKED_PATTERNS, TmuxSettings
from bridgecli_tmux.launcher import DEFAULT_SESSION

PLUGIN_SETTINGS = (
    Setting(
        "socket",
        str,
        None,
        "tmux socket: a path (-S) if it contains /, else a name (-L); "
        "default BRIDGE_TMUX_SOCKET, else tmux's default server.",
    ),
    Setting("session", str, DEFAULT_SESSION, "Launcher: session for new windows (created detached if missing)."),
    Setting(
        "confirm_timeout",
        float,
        TmuxSettings.confirm_timeout,
        "Seconds to wait for the header to show, and for the paste.",
        check=non_negative,
    ),
    Setting("enter_delay", float, TmuxSettings.enter_delay, "Seconds between paste and Enter.", check=non_negative),
    Setting(
        "max_inline_bytes",
        int,
        TmuxSettings.max_bytes,
        "Content shown inline is cut at this many bytes.",
        check=non_negative,
    ),
    Setting(
        "max_inline_lines",
        int,
        TmuxSettings.max_lines,
        "Content shown inline is cut at this many lines.",
        check=non_negative,
    ),
    Setting("multiline", str, TmuxSettings.multiline, "line folds the frame onto one line.", choices=("paste", "line")),
    Setting(
        "shell_safe",
        str,
        TmuxSettings.shell_safe,
        "When to render frames as # comment lines.",
        choices=("auto", "always", "never"),
    ),
    Setting("control_mode", bool, TmuxSettings.control_mode, "false: one tmux process per command."),
    Setting(
        "blocked_pattern",
        list,
        list(DEFAULT_BLOCKED_PATTERNS),
        "Regex or list of regexes of an open approval dialog; [] turns the check off.",
        check=regexes,
    ),
    Setting(
        "blocked_wait",
        float,
        TmuxSettings.blocked_wait,
        "Seconds to wait for a dialog to close before a retryable failure.",
        check=non_negative,
    ),
)

PROFILE_SETTINGS = (
    Setting("tmux_session", str, None, "Session to open the window in (default [plugins.tmux] session)."),
    Setting(
        "tmux_split",
        str,
        "window",
        "A new window, or a pane split off the session's current window.",
        choices=("window", "pane"),
    ),
    Setting(
        "ready_pattern", str, None, "Regex that must show in the pane before the agent counts as ready.", check=regexes
    ),
)
