"""The ``tmux`` launcher: start a spawn profile's command in a new tmux window (or pane).

Profile keys (``launcher = "tmux"``): ``command`` (string = run by the shell, list = argv),
``cwd``, ``env``; ``tmux_session`` (default ``[plugins.tmux] session``, else ``bridge``;
created detached); ``tmux_split`` (``window`` or ``pane``); ``ready_pattern`` (a regex that
must show before the agent is ready; without it, ready = the pane is alive). The pane stays
after its program exits (``remain-on-exit``) so a failed start can be diagnosed; ``stop``
kills it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bridgecli.errors import BridgeError, ConfigError, Timeout
from bridgecli.interfaces import LaunchHandle, LaunchSpec
from bridgecli_tmux.backend import pane_status
from bridgecli_tmux.client import SEP, PaneGone, Tmux, socket_from

if TYPE_CHECKING:
    from bridgecli.config import Config

DEFAULT_SESSION = "bridge"


class TmuxLauncher:
    """Launcher ``tmux`` (see the module docstring)."""

    def __init__(self, settings: Mapping[str, Any], tmux: Tmux | None = None) -> None:
        self.settings = dict(settings)
        self.tmux = tmux or Tmux(socket_from(self.settings))

    @classmethod
    def from_config(cls, config: Config) -> TmuxLauncher:
        return cls(config.plugin_settings("tmux"))

    def start(self, spec: LaunchSpec) -> LaunchHandle:
        """Open the window, run the command there with ``spec.env`` set, return its pane."""
        profile = spec.profile
        session = str(profile.get("tmux_session") or self.settings.get("session") or DEFAULT_SESSION)
        split = str(profile.get("tmux_split", "window"))
        if split not in ("window", "pane"):
            raise ConfigError(
                f"profile {spec.profile_name}: tmux_split = {split!r} is not window or pane",
                'use tmux_split = "window" or "pane"',
            )
        pattern = profile.get("ready_pattern")
        if pattern is not None:
            try:
                re.compile(str(pattern))
            except re.error as exc:
                raise ConfigError(
                    f"profile {spec.profile_name}: ready_pattern is not a valid regex ({exc})", "fix ready_pattern"
                ) from None
        self._ensure_session(session, spec)
        # Not detached (-d): the new pane must become the sequence's current pane so that the
        # chained set-option applies to it before tmux can reap a program that exits at once.
        args = (
            ["new-window", "-n", spec.label[:32] or "bridge", "-t", f"{session}:"]
            if split == "window"
            else ["split-window", "-t", f"{session}:"]
        )
        args += ["-P", "-F", "#{pane_id}"]
        if spec.cwd:
            args += ["-c", spec.cwd]
        for key, value in spec.env.items():
            args += ["-e", f"{key}={value}"]
        command = spec.command
        args += ["--", command] if isinstance(command, str) else ["--", *command]
        pane_id = self.tmux.run(*args, SEP, "set-option", "-p", "remain-on-exit", "on").strip().splitlines()[0]
        data = {"pane_id": pane_id, "socket": self.tmux.socket, "session": session, "ready_pattern": pattern}
        return LaunchHandle(launcher="tmux", deliver=f"tmux:{pane_id}", data=data)

    def _ensure_session(self, session: str, spec: LaunchSpec) -> None:
        try:
            self.tmux.run("has-session", "-t", f"={session}")
        except PaneGone:
            self.tmux.run("new-session", "-d", "-s", session, *(["-c", spec.cwd] if spec.cwd else []))

    def _tmux_for(self, handle: LaunchHandle) -> Tmux:
        socket = handle.data.get("socket")
        return self.tmux if socket == self.tmux.socket else Tmux(socket)

    def wait_ready(self, handle: LaunchHandle, timeout: float) -> None:
        """Ready = the pane is alive and (if set) ``ready_pattern`` is on its screen."""
        tmux = self._tmux_for(handle)
        pane = str(handle.data["pane_id"])
        pattern = handle.data.get("ready_pattern")
        regex = re.compile(str(pattern)) if pattern else None
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            try:
                info = tmux.pane(pane)
            except PaneGone as exc:
                raise BridgeError(
                    f"the tmux pane {pane} of the new agent disappeared ({exc.message})",
                    "check the profile's command by running it by hand",
                ) from None
            screen = tmux.capture(pane, 200)
            if info.dead:
                # tmux may see the exit before it has read the last output from the pty (a busy
                # machine): give it a moment, so the error shows what the command said
                for _ in range(20):
                    if any(line.strip() and not line.startswith("Pane is dead") for line in screen.splitlines()):
                        break
                    time.sleep(0.05)
                    screen = tmux.capture(pane, 200)
                tail = " | ".join(line.strip() for line in screen.splitlines() if line.strip())
                raise BridgeError(
                    f"the agent's command exited in tmux pane {pane}; last lines: {tail[-400:]}",
                    "fix the profile's command (the pane is kept for inspection)",
                )
            if regex is None or regex.search(screen):
                return
            if time.monotonic() >= deadline:
                raise Timeout(
                    f"tmux pane {pane} did not show ready_pattern {pattern!r} within {timeout:g}s",
                    "check the pane (tmux attach) or raise the spawn's --wait-ready",
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def stop(self, handle: LaunchHandle) -> None:
        """Kill the pane; stopping a pane that is already gone is fine."""
        try:
            self._tmux_for(handle).run("kill-pane", "-t", str(handle.data["pane_id"]))
        except PaneGone:
            pass

    def status(self, handle: LaunchHandle) -> str:
        try:
            return pane_status(self._tmux_for(handle).pane(str(handle.data["pane_id"]))).status
        except PaneGone:
            return "gone"
