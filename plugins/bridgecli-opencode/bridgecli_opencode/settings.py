"""The keys of ``[plugins.opencode]`` and of profiles with ``launcher = "opencode"``, declared
so that ``bridge config set`` can check them (the README documents each)."""

from __future__ import annotations

from bridgecli.config import Setting, non_negative
from bridgecli_opencode.backend import OpenCodeSettings
from bridgecli_opencode.tui import DEFAULT_TMUX_SESSION

PLUGIN_SETTINGS = (
    Setting(
        "confirm_timeout",
        float,
        OpenCodeSettings.confirm_timeout,
        "Seconds to wait for OpenCode to store a posted message.",
        check=non_negative,
    ),
    Setting(
        "request_timeout",
        float,
        OpenCodeSettings.request_timeout,
        "Seconds one request to the server may take.",
        check=non_negative,
    ),
    Setting(
        "status_timeout",
        float,
        OpenCodeSettings.status_timeout,
        "Seconds a status request may take.",
        check=non_negative,
    ),
    Setting(
        "password_file",
        str,
        None,
        "File holding the server password, for entities registered by hand "
        "(default: OPENCODE_SERVER_PASSWORD of the gateway).",
    ),
    Setting(
        "max_inline_bytes",
        int,
        OpenCodeSettings.max_bytes,
        "Content shown inline is cut at this many bytes.",
        check=non_negative,
    ),
    Setting(
        "max_inline_lines",
        int,
        OpenCodeSettings.max_lines,
        "Content shown inline is cut at this many lines.",
        check=non_negative,
    ),
)

PROFILE_SETTINGS = (
    Setting("opencode_tui", bool, False, "Open the OpenCode TUI, attached to the session, in a tmux window."),
    Setting("tmux_session", str, DEFAULT_TMUX_SESSION, "tmux session for the TUI window (created if missing)."),
    Setting("tmux_socket", str, None, "tmux socket for the TUI: a path, or a name (default BRIDGE_TMUX_SOCKET)."),
)
