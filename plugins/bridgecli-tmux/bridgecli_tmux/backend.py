"""The ``tmux`` delivery backend: type a framed message into a pane and confirm it is there.

``--deliver tmux:<target>`` (a pane id ``%3`` or ``session:window.pane``). The header is typed
as keys (a folded paste would hide the marker), the rest pasted with ``-p``, then
Enter pressed; each step waits until the pane shows the one before, counting only what
appeared after the attempt began, as Claude Code applies a paste late and an early Enter
submits the header alone. Shell panes get ``#`` comments (docs/security.md). An approval
dialog is waited out, then fails retryably, as does a gone pane.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bridgecli.blocking import wait_unblocked
from bridgecli.errors import BridgeError, ConfigError, DeliveryError, NotFound
from bridgecli.framing import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, SHELL_PREFIX, Frame, render
from bridgecli_tmux.client import SEP, PaneGone, PaneInfo, Tmux, TmuxError, socket_from

if TYPE_CHECKING:
    from bridgecli.envelope import Envelope
    from bridgecli.interfaces import BackendContext, Entity

#: a pane id, or session[:window[.pane]] without whitespace; never starting with "-"
TARGET_RE = re.compile(r"^(%\d+|[^\s\-;][^\s;]*)$")
_counter = itertools.count()

#: approval dialogs of agent TUIs (regexes, searched per line): Claude Code's "Do you want to
#: proceed?" and the selected first answer of its numbered menus ("❯ 1. Yes"). Conservative on
#: purpose — a false match only delays a delivery — and only the bottom of the screen below the
#: last delivered frame is searched, so a message quoting these words does not block its pane.
DEFAULT_BLOCKED_PATTERNS = (r"Do you want to proceed\?", r"^[\s│┃|>]*❯\s*1\.\s*Yes\b")
#: how many non-blank lines at the bottom of the screen a dialog is looked for in
BLOCKED_SCAN_LINES = 20
_FRAME_END = re.compile(r"\[end bridge [^\]\s]{1,8}\]")
#: how an agent composer shows a paste it folded away: Claude Code's "[Pasted text #N +41 lines]"
#: (a false match only lets Enter go before the paste is shown, as it did before)
PASTE_FOLD = re.compile(r"\[Pasted (?:text|content)\b", re.I)
#: a one-line frame longer than this is typed in two steps, header first: Claude Code takes a
#: burst of typed keys over about 800 characters for a paste and applies it late, like one
TYPED_BURST = 400


@dataclass(frozen=True)
class Before:
    """How many copies of the frame's marker the pane showed before this attempt typed, in
    the capture every wait then uses: ``history`` lines above the screen, or the whole history
    (``None``) when a copy was already there (a retry), so scrolling cannot hide an old one."""

    history: int | None
    count: int


def _float(settings: Mapping[str, Any], key: str, default: float) -> float:
    try:
        value = float(settings.get(key, default))
    except (TypeError, ValueError):
        raise ConfigError(
            f"[plugins.tmux] {key} must be a number, not {settings.get(key)!r}", f"fix {key} in bridge.toml"
        ) from None
    if value < 0:
        raise ConfigError(f"[plugins.tmux] {key} must not be negative", f"fix {key} in bridge.toml")
    return value


def _bool(settings: Mapping[str, Any], key: str, default: bool) -> bool:
    value = settings.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"[plugins.tmux] {key} must be true or false, not {value!r}", f"fix {key} in bridge.toml")
    return value


def _choice(settings: Mapping[str, Any], key: str, default: str, choices: tuple[str, ...]) -> str:
    value = str(settings.get(key, default))
    if value not in choices:
        raise ConfigError(
            f"[plugins.tmux] {key} = {value!r} is not one of {', '.join(choices)}", f"fix {key} in bridge.toml"
        )
    return value


def _patterns(settings: Mapping[str, Any], key: str, default: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    value = settings.get(key, list(default))
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ConfigError(
            f"[plugins.tmux] {key} must be a regex or a list of regexes, not {value!r}",
            f"fix {key} in bridge.toml ([] switches dialog detection off)",
        )
    try:
        return tuple(re.compile(v, re.M) for v in values)
    except re.error as exc:
        raise ConfigError(
            f"[plugins.tmux] {key}: {exc.pattern!r} is not a valid regex ({exc})", f"fix {key} in bridge.toml"
        ) from None


def dialog_on_screen(screen: str, patterns: tuple[re.Pattern[str], ...]) -> str | None:
    """The blocked pattern that matches ``screen`` (an open approval dialog), or None.

    Only what the program drew below the last delivered frame's end line is searched, and only
    its bottom :data:`BLOCKED_SCAN_LINES` non-blank lines: a frame's content always precedes
    its own end line, so a message quoting a dialog never reads as one."""
    if not patterns:
        return None
    lines = screen.split("\n")
    for index in range(len(lines) - 1, -1, -1):
        if _FRAME_END.search(lines[index]):
            lines = lines[index + 1 :]
            break
    tail = "\n".join([line for line in lines if line.strip()][-BLOCKED_SCAN_LINES:])
    return next((p.pattern for p in patterns if p.search(tail)), None)


@dataclass(frozen=True)
class PaneStatus:
    """What :meth:`TmuxBackend.describe` reports: a status word, the foreground command
    (``pane_current_command``) and a human explanation."""

    status: str
    command: str
    detail: str


@dataclass(frozen=True)
class TmuxSettings:
    """``[plugins.tmux]`` keys that shape delivery (README lists them)."""

    socket: str | None = None
    confirm_timeout: float = 5.0
    enter_delay: float = 0.0
    max_bytes: int = DEFAULT_MAX_BYTES
    max_lines: int = DEFAULT_MAX_LINES
    multiline: str = "paste"  # paste | line
    shell_safe: str = "auto"  # auto | always | never
    control_mode: bool = True
    blocked_patterns: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.M) for p in DEFAULT_BLOCKED_PATTERNS)
    blocked_wait: float = 20.0

    @classmethod
    def load(cls, settings: Mapping[str, Any], env: Mapping[str, str] | None = None) -> TmuxSettings:
        return cls(
            socket=socket_from(settings, env),
            confirm_timeout=_float(settings, "confirm_timeout", cls.confirm_timeout),
            enter_delay=_float(settings, "enter_delay", cls.enter_delay),
            max_bytes=int(_float(settings, "max_inline_bytes", cls.max_bytes)),
            max_lines=int(_float(settings, "max_inline_lines", cls.max_lines)),
            multiline=_choice(settings, "multiline", cls.multiline, ("paste", "line")),
            shell_safe=_choice(settings, "shell_safe", cls.shell_safe, ("auto", "always", "never")),
            control_mode=_bool(settings, "control_mode", cls.control_mode),
            blocked_patterns=_patterns(settings, "blocked_pattern", DEFAULT_BLOCKED_PATTERNS),
            blocked_wait=_float(settings, "blocked_wait", cls.blocked_wait),
        )


class TmuxBackend:
    """Delivery backend ``tmux`` (see the module docstring)."""

    inline = False  # waits on a terminal; the gateway runs it off its AMQP thread

    def __init__(self, settings: TmuxSettings, tmux: Tmux | None = None) -> None:
        self.settings = settings
        self.tmux = tmux or Tmux(settings.socket, control=settings.control_mode)

    @classmethod
    def from_context(cls, context: BackendContext) -> TmuxBackend:
        return cls(TmuxSettings.load(context.config.plugin_settings("tmux")))

    # --- DeliveryBackend ------------------------------------------------------------

    def check_address(self, address: str | None) -> None:
        """The address must name an existing pane on the configured server."""
        if not address or not TARGET_RE.match(address):
            raise ConfigError(
                f"tmux target {address!r} is not a pane",
                "use --deliver tmux:%N (inside the pane: tmux:$TMUX_PANE) or tmux:session:window.pane",
            )
        try:
            self.tmux.pane(address)
        except PaneGone as exc:
            raise NotFound(
                f"no tmux pane {address} ({exc.message})",
                "list panes with `tmux list-panes -a -F '#{pane_id}'`, or set "
                "[plugins.tmux] socket / BRIDGE_TMUX_SOCKET to the right server",
            ) from None

    def deliver(self, entity: Entity, envelope: Envelope) -> None:
        """Type the framed message into the pane; return once its marker is visible."""
        target = entity.address
        if not target:
            raise DeliveryError(
                f"entity {entity.label} has no tmux pane in --deliver {entity.deliver!r}",
                "re-register it with --deliver tmux:%N",
                retryable=False,
            )
        history = len(render(envelope, max_bytes=self.settings.max_bytes, max_lines=self.settings.max_lines).lines)
        info, window = self._live_pane(target, history + 20)
        frame = self.frame(envelope, info)
        try:
            before = self._before(info.pane_id, frame, window, history + 20)
            self._type(info, frame, before)
            self._confirm(info.pane_id, frame, before)
        except PaneGone as exc:
            raise self._gone(target, exc) from None
        except TmuxError as exc:
            raise DeliveryError(f"tmux could not deliver to {target}: {exc.message}", exc.hint) from None

    def status(self, entity: Entity) -> str:
        """``gone`` (no pane, or its program exited), ``blocked`` (an approval dialog is on
        screen), ``unknown`` (a shell is in front: the agent exited or never started, so
        nothing there is idle-and-ready) or ``running``; :meth:`describe` adds the foreground
        command."""
        return self.describe(entity).status

    def describe(self, entity: Entity) -> PaneStatus:
        """The pane's status word with its foreground command and an explanation."""
        if not entity.address:
            return PaneStatus("gone", "", "no tmux pane in --deliver")
        try:
            info, screen = self.tmux.pane_and_screen(entity.address)
        except PaneGone as exc:
            return PaneStatus("gone", "", exc.message)
        except BridgeError as exc:
            return PaneStatus("unknown", "", str(exc))
        return pane_status(info, dialog_on_screen(screen, self.settings.blocked_patterns))

    # --- steps ----------------------------------------------------------------------

    def frame(self, envelope: Envelope, info: PaneInfo) -> Frame:
        """Render ``envelope`` for this pane (shell panes get ``#`` comment lines)."""
        shell = self.settings.shell_safe == "always" or (
            self.settings.shell_safe == "auto" and info.shell_in_foreground
        )
        if shell and info.shell_in_foreground and not info.comments_work:
            raise DeliveryError(
                f"tmux pane {info.pane_id} has {info.command} in front, which runs '#' lines typed at its "
                "prompt as commands; nothing was typed (the agent there has exited)",
                "restart the agent in that pane; the message is retried",
                retryable=True,
            )
        return render(
            envelope,
            max_bytes=self.settings.max_bytes,
            max_lines=self.settings.max_lines,
            line_prefix=SHELL_PREFIX if shell else "",
        )

    def _live_pane(self, target: str, history: int) -> tuple[PaneInfo, str]:
        """The pane, once no approval dialog is open in it (never type into a dialog), and
        what it showed then, ``history`` lines above the screen included."""
        patterns = self.settings.blocked_patterns
        if not patterns:
            info, _, window = self._lookup(target, lambda: self.tmux.pane_screen_and_history(target, history))
            return info, window
        info, _, window = wait_unblocked(
            lambda: self._lookup(target, lambda: self.tmux.pane_screen_and_history(target, history)),
            lambda state: dialog_on_screen(state[1], patterns) is not None,
            timeout=self.settings.blocked_wait,
            failure=lambda: DeliveryError(
                f"tmux pane {target} shows an approval dialog; nothing was typed "
                f"(waited {self.settings.blocked_wait:g}s)",
                "answer the dialog in the pane; the message is retried",
                retryable=True,
            ),
        )
        return info, window

    def _lookup(self, target: str, probe: Callable[[], tuple[PaneInfo, str, str]]) -> tuple[PaneInfo, str, str]:
        try:
            info, screen, window = probe()
        except PaneGone as exc:
            raise self._gone(target, exc) from None
        except TmuxError as exc:
            raise DeliveryError(f"tmux could not look up {target}: {exc.message}", exc.hint) from None
        if info.dead:
            raise DeliveryError(
                f"the program in tmux pane {target} has exited (pane is dead)",
                "restart the agent there and re-register it",
                retryable=True,
            )
        return info, screen, window

    def _before(self, pane: str, frame: Frame, window: str, history: int) -> Before:
        """Count the marker's copies on screen before typing (see :class:`Before`)."""
        if frame.marker not in window:
            return Before(history, 0)  # scrolling only moves older copies further out of this window
        return Before(None, self._capture(pane, None).count(frame.marker))

    def _type(self, info: PaneInfo, frame: Frame, before: Before) -> None:
        pane = info.pane_id
        args: list[str] = []
        if info.in_mode:  # keys would drive copy mode instead of reaching the program
            args += ["send-keys", "-t", pane, "-X", "cancel", SEP]
        text = frame.one_line()
        if self.settings.multiline == "line" and len(text) <= TYPED_BURST:
            self._enter(pane, [*args, "send-keys", "-t", pane, "-l", "--", text])  # the hot path: one call
            return
        self.tmux.run(*args, "send-keys", "-t", pane, "-l", "--", frame.header)
        if not self._until_shown(pane, before, lambda shown: shown.count(frame.marker) > before.count):
            raise self._unconfirmed(pane, frame)
        if self.settings.multiline == "line":
            self.tmux.run("send-keys", "-t", pane, "-l", "--", text[len(frame.header) :])
        else:
            buffer = f"bridge-{os.getpid()}-{next(_counter)}"
            self.tmux.run(
                *("load-buffer", "-b", buffer, "-", SEP, "paste-buffer", "-p", "-d", "-b", buffer, "-t", pane),
                input=("\n" + frame.body).encode("utf-8"),
            )
        # not shown in time (a composer that shows pastes some other way): Enter all the same
        self._until_shown(
            pane, before, lambda shown: shown.count(frame.marker) > before.count and _pasted(shown, frame)
        )
        self._enter(pane, [])

    def _enter(self, pane: str, args: list[str]) -> None:
        """Run ``args`` (if any) and press Enter: in one call, or after ``enter_delay``."""
        if args and self.settings.enter_delay > 0:
            self.tmux.run(*args)
            args = []
        if self.settings.enter_delay > 0:
            time.sleep(self.settings.enter_delay)
        self.tmux.run(*args, *([SEP] if args else []), "send-keys", "-t", pane, "Enter")

    def _capture(self, pane_id: str, history: int | None) -> str:
        if history is None:
            return self.tmux.run("capture-pane", "-p", "-J", "-S", "-", "-t", pane_id)
        return self.tmux.capture(pane_id, history)

    def _until_shown(self, pane_id: str, before: Before, shown: Callable[[str], bool]) -> bool:
        """Whether ``shown(screen)`` came true within ``confirm_timeout``, polling with backoff."""
        deadline = time.monotonic() + self.settings.confirm_timeout
        delay = 0.002
        while True:
            if shown(self._capture(pane_id, before.history)):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _confirm(self, pane_id: str, frame: Frame, before: Before) -> None:
        if not self._until_shown(pane_id, before, lambda shown: shown.count(frame.marker) > before.count):
            raise self._unconfirmed(pane_id, frame)

    def _unconfirmed(self, pane_id: str, frame: Frame) -> DeliveryError:
        return DeliveryError(
            f"message {frame.msg_id} was typed into tmux pane {pane_id} but its header "
            f"{frame.marker} did not appear within {self.settings.confirm_timeout:g}s",
            "the program there may not echo input; check the pane",
            retryable=True,
        )

    def _gone(self, target: str, exc: TmuxError) -> DeliveryError:
        # retryable: the gateway retries with backoff and dead-letters after
        # messaging.max_attempts (docs/design.md#invariant-6); the roster shows the entity gone meanwhile
        return DeliveryError(
            f"tmux pane {target} is gone: {exc.message}",
            "the agent's pane was closed; restart it and re-register the entity",
            retryable=True,
        )


def pane_status(info: PaneInfo, dialog: str | None = None) -> PaneStatus:
    """Map a pane (and the dialog pattern found on its screen, if any) to a status."""
    command = info.command
    if info.dead:
        return PaneStatus("gone", command, "the pane's program has exited (pane is dead)")
    if dialog is not None:
        return PaneStatus("blocked", command, f"{command} shows an approval dialog (matched {dialog!r})")
    if info.shell_in_foreground:
        return PaneStatus("unknown", command, f"no agent running: the shell {command} is in front")
    return PaneStatus("running", command, f"{command} is in front")


def _pasted(screen: str, frame: Frame) -> bool:
    """Whether ``screen`` shows the paste after the frame's newest header: its end line, or a fold."""
    after = screen.rsplit(frame.marker, 1)[-1]
    return f"[end {frame.marker[1:]}" in after or PASTE_FOLD.search(after) is not None
