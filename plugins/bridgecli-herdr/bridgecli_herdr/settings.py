"""The keys of ``[plugins.herdr]`` and of profiles with ``launcher = "herdr"``, declared so
that ``bridge config set`` can check them (the README documents each)."""

from __future__ import annotations

from bridgecli.config import Setting, non_negative, regexes
from bridgecli_herdr.backend import HerdrSettings
from bridgecli_herdr.launcher import DEFAULT_PROMPT

PLUGIN_SETTINGS = (
    Setting("socket", str, None, "Path of the herdr server's socket."),
    Setting("session", str, None, "Name of the herdr session whose server to use."),
    Setting(
        "blocked_wait",
        float,
        HerdrSettings.blocked_wait,
        "Seconds to wait for a blocked agent before a retryable failure.",
        check=non_negative,
    ),
    Setting(
        "confirm_timeout",
        float,
        HerdrSettings.confirm_timeout,
        "Seconds to wait for the marker / a state change.",
        check=non_negative,
    ),
    Setting(
        "max_inline_bytes",
        int,
        HerdrSettings.max_bytes,
        "Content shown inline is cut at this many bytes.",
        check=non_negative,
    ),
    Setting(
        "max_inline_lines",
        int,
        HerdrSettings.max_lines,
        "Content shown inline is cut at this many lines.",
        check=non_negative,
    ),
    Setting(
        "method",
        str,
        HerdrSettings.method,
        "prompt uses agent.prompt for agent panes.",
        choices=("send_input", "prompt"),
    ),
    Setting(
        "multiline", str, HerdrSettings.multiline, "line folds the frame onto one line.", choices=("paste", "line")
    ),
    Setting("split_from", str, None, "Launcher: pane to split (default $HERDR_PANE_ID, else the focused pane)."),
    Setting("prompt_pattern", str, DEFAULT_PROMPT, "Launcher: regex of the new shell's prompt.", check=regexes),
    Setting("timeout", float, 10.0, "Socket timeout in seconds for ordinary requests.", check=non_negative),
)

PROFILE_SETTINGS = (
    Setting("herdr_pane", str, None, "Pane to split (default [plugins.herdr] split_from)."),
    Setting("herdr_direction", str, "right", "Where the new pane goes.", choices=("right", "down")),
    Setting(
        "ready_pattern", str, None, "Regex that must show in the pane before the agent counts as ready.", check=regexes
    ),
)
