"""A thin, synchronous wrapper around the ``tmux`` command on one server socket.

Each call is one ``tmux`` process; several tmux commands are chained in one call with ``;``
arguments, which is how a delivery stays at one or two processes. Failures become
:class:`bridgecli.errors.BridgeError` subclasses with the socket named, because "which tmux
server?" is the first question whenever something goes wrong.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bridgecli.errors import BridgeError, ExitCode, MissingDependency
from bridgecli_tmux.control import ControlChannel, ControlClosed

#: ``pane_current_command`` values that mean "a shell is in the foreground"
SHELLS = frozenset(
    {
        "sh",
        "bash",
        "dash",
        "zsh",
        "fish",
        "ksh",
        "mksh",
        "tcsh",
        "csh",
        "ash",
        "busybox",
        "nu",
        "elvish",
        "xonsh",
        "pwsh",
        "yash",
        "oksh",
    }
)
#: shells that do *not* treat ``#`` as a comment at an interactive prompt (zsh without
#: ``setopt interactivecomments``, csh/tcsh): a ``# `` line typed there runs as a command
NO_INTERACTIVE_COMMENTS = frozenset({"zsh", "csh", "tcsh"})
SEP = ";"  # a lone ";" argument separates tmux commands in one invocation
_INFO_FORMAT = "#{pane_id}\t#{pane_dead}\t#{pane_in_mode}\t#{pane_pid}\t#{pane_current_command}"


class TmuxError(BridgeError):
    """tmux refused a command or could not be reached."""

    exit_code = ExitCode.PLUGIN


class PaneGone(TmuxError):
    """The pane (or its window, session or server) no longer exists."""


@dataclass(frozen=True)
class PaneInfo:
    """What ``display-message`` tells about a pane."""

    pane_id: str
    dead: bool
    in_mode: bool
    pid: int
    command: str

    @property
    def shell_in_foreground(self) -> bool:
        """True when the pane's foreground program is a shell (its agent exited, or it
        never was an agent pane): text typed there would run as commands."""
        return self.command.lstrip("-") in SHELLS

    @property
    def comments_work(self) -> bool:
        """False for a shell in front that would run a ``# `` line typed at its prompt."""
        return self.command.lstrip("-") not in NO_INTERACTIVE_COMMENTS


def socket_from(settings: Mapping[str, object], env: Mapping[str, str] | None = None) -> str | None:
    """The tmux socket: ``[plugins.tmux] socket``, else ``BRIDGE_TMUX_SOCKET``, else None
    (the default server, or the one ``$TMUX`` points at)."""
    env = os.environ if env is None else env
    value = settings.get("socket") or env.get("BRIDGE_TMUX_SOCKET") or None
    return str(value) if value else None


class Tmux:
    """Runs tmux commands against one server.

    ``socket`` containing a ``/`` is a socket path (``tmux -S``); otherwise it is a socket
    name under tmux's own directory (``tmux -L``). With ``control=True`` commands go through
    one persistent control-mode client (:mod:`bridgecli_tmux.control`) when one can be
    attached, and through one ``tmux`` process per call otherwise.
    """

    def __init__(
        self, socket: str | None = None, *, binary: str = "tmux", timeout: float = 10.0, control: bool = False
    ) -> None:
        self.socket = socket
        self.binary = binary
        self.timeout = timeout
        self.control = control
        self._channel: ControlChannel | None = None
        self._channel_lock = threading.Lock()
        self._control_retry_at = 0.0

    def where(self) -> str:
        """Human name of the server, for error messages."""
        return f"tmux server {self.socket}" if self.socket else "the default tmux server"

    def argv(self, *args: str) -> list[str]:
        base = [self.binary]
        if self.socket:
            base += ["-S", self.socket] if "/" in self.socket else ["-L", self.socket]
        return base + list(args)

    def run(self, *args: str, input: bytes | None = None) -> str:
        """Run tmux commands (``SEP``-separated) and return their output; raise on failure."""
        channel = self._control() if self.control else None
        if channel is not None:
            try:
                return self._run_control(channel, args, input)
            except ControlClosed as exc:
                self._channel = None
                if exc.args and exc.args[0] == "partial":  # never type a message twice
                    raise TmuxError(
                        f"the control client of {self.where()} went away mid-command", "the delivery is retried"
                    ) from None
        return self._run_process(args, input)

    def close(self) -> None:
        """Detach the control client, if any."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _control(self) -> ControlChannel | None:
        with self._channel_lock:
            if self._channel is not None and not self._channel.closed:
                return self._channel
            if time.monotonic() < self._control_retry_at:
                return None
            try:
                session = self._run_process(("list-sessions", "-F", "#{session_id}"), None).split()[0]
                self._channel = ControlChannel(
                    self.argv("-C", "attach-session", "-f", "no-output,ignore-size", "-t", session),
                    timeout=self.timeout,
                )
            except (BridgeError, ControlClosed, IndexError, OSError):
                self._channel = None
                self._control_retry_at = time.monotonic() + 5.0
            return self._channel

    def _run_control(self, channel: ControlChannel, args: Sequence[str], input: bytes | None) -> str:
        commands: list[list[str]] = [[]]
        for arg in args:
            if arg == SEP:
                commands.append([])
            else:
                commands[-1].append(arg)
        output: list[str] = []
        for command in filter(None, commands):
            if command[0] == "load-buffer" and command[-1] == "-":  # no stdin in control mode
                command = ["set-buffer", *command[1:-1], "--", (input or b"").decode("utf-8")]
            try:
                ok, out = channel.command(*command)
            except ControlClosed:
                raise ControlClosed("partial" if output else "unused") from None
            if not ok:
                raise self._error(out.strip(), command)
            output.append(out)
        return "".join(output)

    def _run_process(self, args: Sequence[str], input: bytes | None) -> str:
        try:
            proc = subprocess.run(
                self.argv(*args),
                input=input,
                capture_output=True,
                timeout=self.timeout,
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except FileNotFoundError:
            raise MissingDependency("tmux is not installed", "install it (Debian: apt-get install tmux)") from None
        except subprocess.TimeoutExpired:
            raise TmuxError(
                f"{self.where()} did not answer within {self.timeout:g}s",
                "check that the server is not stuck (tmux list-sessions)",
            ) from None
        if proc.returncode != 0:
            raise self._error(proc.stderr.decode("utf-8", "replace").strip(), args)
        return proc.stdout.decode("utf-8", "replace")

    def _error(self, stderr: str, args: Sequence[str]) -> TmuxError:
        first = stderr.splitlines()[0] if stderr else f"exit status without a message ({args[0]})"
        if "can't find" in first:
            return PaneGone(
                f"{first} on {self.where()}",
                "the pane was closed; check `tmux list-panes -a` and re-register the entity",
            )
        if "no server running" in first or "error connecting" in first:
            return PaneGone(
                f"{self.where()} is not running ({first})",
                "start tmux on that socket or fix [plugins.tmux] socket / BRIDGE_TMUX_SOCKET",
            )
        return TmuxError(
            f"tmux {args[0]} failed on {self.where()}: {first}", "run the same tmux command by hand to see why"
        )

    def pane(self, target: str) -> PaneInfo:
        """Look ``target`` up; :class:`PaneGone` if it does not exist."""
        return self._parse_info(target, self.run("display-message", "-p", "-t", target, _INFO_FORMAT).rstrip("\n"))

    def pane_and_screen(self, target: str) -> tuple[PaneInfo, str]:
        """:meth:`pane` and the pane's visible text, in one tmux call."""
        out = self.run(
            "display-message", "-p", "-t", target, _INFO_FORMAT, SEP, "capture-pane", "-p", "-J", "-t", target
        )
        first, _, screen = out.partition("\n")
        return self._parse_info(target, first), screen

    def pane_screen_and_history(self, target: str, history: int) -> tuple[PaneInfo, str, str]:
        """:meth:`pane_and_screen`, and the visible text with ``history`` lines above it, in one
        tmux call."""
        import uuid

        split = f"bridge-split-{uuid.uuid4().hex}"
        out = self.run(
            *("display-message", "-p", "-t", target, _INFO_FORMAT, SEP, "capture-pane", "-p", "-J", "-t", target),
            *(SEP, "display-message", "-p", "-t", target, split),
            *(SEP, "capture-pane", "-p", "-J", "-S", f"-{history}", "-t", target),
        )
        first, _, rest = out.partition("\n")
        screen, _, window = rest.partition(split + "\n")
        return self._parse_info(target, first), screen, window

    def _parse_info(self, target: str, out: str) -> PaneInfo:
        parts = out.split("\t", 4)
        if not parts[0]:  # tmux 3.3 answers an unknown pane id with empty fields, not an error
            raise PaneGone(
                f"can't find pane: {target} on {self.where()}",
                "the pane was closed; check `tmux list-panes -a` and re-register the entity",
            )
        if len(parts) != 5 or not parts[0].startswith("%"):
            raise TmuxError(
                f"unexpected answer from {self.where()} about {target}: {out!r}",
                "check the tmux version (3.0 or newer is needed)",
            )
        pane_id, dead, in_mode, pid, command = parts
        return PaneInfo(pane_id=pane_id, dead=dead == "1", in_mode=in_mode == "1", pid=int(pid or 0), command=command)

    def capture(self, pane_id: str, history: int = 0) -> str:
        """The pane's visible text plus ``history`` lines above it, wrapped lines joined."""
        args = ["capture-pane", "-p", "-J", "-t", pane_id]
        if history > 0:
            args += ["-S", f"-{history}"]
        return self.run(*args)


def tmux_available() -> bool:
    """True when a ``tmux`` binary is on PATH."""
    return shutil.which("tmux") is not None
