"""Built-in agent kinds and the one merged view of a spawn profile.

A profile with ``agent = "claude-code"`` (or ``codex``, ``opencode``, ``gemini``) starts from
that kind's defaults: command, tmux launcher, the ``ready_pattern`` of its real TUI and how
a first prompt is passed. Keys the profile sets win; ``env`` entries merge. :func:`resolve`
builds that :class:`Profile` once, for spawn and ``bridge config`` alike.

A first prompt may come from another host: :func:`check_prompt` bounds it and makes control
characters inert, and it only ever becomes one argv element that cannot be read as an
option, never part of a shell command line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridgecli.errors import ConfigError, Rejected
from bridgecli.sanitize import sanitize

#: the stand-in for the prompt in a ``prompt_args`` template
PROMPT = "{prompt}"
#: the largest first prompt a spawn request may carry (UTF-8 bytes)
MAX_PROMPT_BYTES = 16 * 1024
#: the launcher of an agent kind when the profile names none: these are terminal UIs
AGENT_LAUNCHER = "tmux"
#: the launcher of a profile that has no agent kind and names none
DEFAULT_LAUNCHER = "subprocess"


@dataclass(frozen=True)
class AgentKind:
    """One agent CLI: what a profile with ``agent = NAME`` gets unless it says otherwise.

    ``ready_pattern`` is searched in the tmux pane's screen; each was read off the real
    program's TUI (the versions are in docs/agents.md). ``prompt_ready_pattern``, when set,
    replaces it for a spawn that passes a first prompt.
    """

    name: str
    command: tuple[str, ...]
    ready_pattern: str
    prompt_args: tuple[str, ...]
    ready_timeout: float = 60.0
    env: Mapping[str, str] = field(default_factory=dict)
    launcher: str = AGENT_LAUNCHER
    prompt_ready_pattern: str | None = None

    def defaults(self) -> dict[str, Any]:
        """The profile keys this kind provides, as a profile table would hold them."""
        table: dict[str, Any] = {
            "launcher": self.launcher,
            "command": list(self.command),
            "ready_pattern": self.ready_pattern,
            "prompt_args": list(self.prompt_args),
            "ready_timeout": self.ready_timeout,
        }
        if self.env:
            table["env"] = dict(self.env)
        return table


KINDS: dict[str, AgentKind] = {
    kind.name: kind
    for kind in (
        # Claude Code: its input line starts at column 0 with "❯" and a no-break space; the
        # API-key and trust dialogs indent their "❯ 1." menus, so they never match.
        AgentKind("claude-code", ("claude",), "(?m)^\u276f\u00a0", ("--", PROMPT)),
        # Codex: its composer line starts with "› "; the trust dialog's "› 1. Trust" does not count.
        AgentKind("codex", ("codex",), r"(?m)^› (?!\d+\. )", ("--", PROMPT)),
        # OpenCode: its home view's empty input ("Ask anything…"). A --prompt=TEXT (its
        # positional argument is a project directory) is submitted from that same home view,
        # which then switches to the session view and drops keys typed meanwhile: with a
        # prompt, ready is the session's first reply header ("▣"), drawn with its input box.
        AgentKind(
            "opencode",
            ("opencode",),
            "Ask anything…",
            ("--prompt=" + PROMPT,),
            prompt_ready_pattern=r"(?m)^\s*▣ ",
        ),
        # Gemini CLI: the input placeholder. It ignores a positional prompt after "--", and
        # -i/--prompt-interactive=TEXT submits one and stays interactive. The placeholder can
        # show before its config is initialised: a message entered then is queued, and the
        # queue is dropped when the argv prompt is submitted. With a prompt, ready is that
        # prompt in the history (" > TEXT") above the empty input line.
        AgentKind(
            "gemini",
            ("gemini",),
            "Type your message",
            ("--prompt-interactive=" + PROMPT,),
            prompt_ready_pattern=r"(?ms)^ > .*^ >   Type your message",
        ),
    )
}
KIND_NAMES: tuple[str, ...] = tuple(sorted(KINDS))


def check_prompt_args(template: Sequence[str], where: str) -> tuple[str, ...]:
    """``template`` as a tuple, once it places :data:`PROMPT` safely: in exactly one element,
    which is either the whole element right after ``--`` or ends a ``--flag=`` element. Any
    other place could let a prompt such as ``-h`` be read as an option."""
    args = tuple(str(a) for a in template)
    holders = [i for i, a in enumerate(args) if PROMPT in a]
    hint = 'write prompt_args as ["--", "{prompt}"] or ["--flag={prompt}"]'
    if len(holders) != 1:
        raise ConfigError(f"{where}: prompt_args must hold {PROMPT} exactly once", hint)
    i = holders[0]
    arg = args[i]
    after_dashes = arg == PROMPT and i > 0 and args[i - 1] == "--"
    as_value = arg.startswith("--") and arg.endswith("=" + PROMPT) and arg.count(PROMPT) == 1
    if not (after_dashes or as_value):
        raise ConfigError(f"{where}: prompt_args would let a prompt be read as an option", hint)
    return args


def check_prompt(prompt: Any) -> str | None:
    """A first prompt as it may reach a command line: None when absent or empty, else the text
    with every control character but LF and TAB made visible; over :data:`MAX_PROMPT_BYTES`
    or not a string is refused (it may come from another host)."""
    if prompt is None or prompt == "":
        return None
    if not isinstance(prompt, str):
        raise Rejected("the spawn prompt is not a string", "pass the prompt as text")
    size = len(prompt.encode("utf-8", "surrogatepass"))
    if size > MAX_PROMPT_BYTES:
        raise Rejected(
            f"the spawn prompt is {size} bytes, over the {MAX_PROMPT_BYTES} byte limit",
            "shorten it, or send the rest as a message once the agent is up",
        )
    return sanitize(prompt)


@dataclass(frozen=True)
class Profile:
    """A spawn profile as it runs: the file's table over its agent kind's defaults.

    ``table`` is the merged table (what a launcher reads); ``sources`` says, per key, whether
    it came from the file or the kind (``agent NAME``).
    """

    name: str
    kind: AgentKind | None
    table: Mapping[str, Any]
    sources: Mapping[str, str]

    @property
    def launcher(self) -> str:
        """The launcher's name (the default launcher when neither file nor kind names one)."""
        return str(self.table.get("launcher", DEFAULT_LAUNCHER))

    @property
    def command(self) -> str | list[str] | None:
        """A string (run by the shell), an argv list, or None when the profile has none."""
        command = self.table.get("command")
        if isinstance(command, str):
            return command
        return [str(a) for a in command] if command else None

    def launch_table(self, prompt: str | None) -> Mapping[str, Any]:
        """The table a launcher gets: :attr:`table`, with the kind's ``prompt_ready_pattern``
        as ``ready_pattern`` when ``prompt`` is given and the file sets no ``ready_pattern``."""
        kind = self.kind
        if prompt is None or kind is None or kind.prompt_ready_pattern is None:
            return self.table
        if self.sources.get("ready_pattern") == "file":
            return self.table
        return {**self.table, "ready_pattern": kind.prompt_ready_pattern}

    def argv(self, prompt: str | None, where: str) -> str | list[str]:
        """The command to launch, with ``prompt`` (already :func:`check_prompt`-ed) placed by
        ``prompt_args``. Raises ConfigError when there is no command, or a prompt but no
        template or a shell command line."""
        command = self.command
        if not command:
            raise ConfigError(
                f"profile {self.name!r} on {where} has no command",
                f"set [profiles.{self.name}] command, or agent = one of {', '.join(KIND_NAMES)}",
            )
        if prompt is None:
            return command
        template = self.table.get("prompt_args")
        if not template:
            raise ConfigError(
                f"profile {self.name!r} on {where} takes no prompt (no agent kind, no prompt_args)",
                f"set [profiles.{self.name}] agent or prompt_args, or spawn without --prompt",
            )
        if isinstance(command, str):
            raise ConfigError(
                f"profile {self.name!r} on {where} runs its command through the shell, which never gets a prompt",
                f"write [profiles.{self.name}] command as a list of strings",
            )
        args = check_prompt_args(template, f"profile {self.name!r} on {where}")
        return [*command, *(a.replace(PROMPT, prompt) for a in args)]


def resolve(name: str, table: Mapping[str, Any]) -> Profile:
    """The merged profile ``name`` from its file ``table``: the agent kind's defaults, then
    every key of the table (``env`` merged entry by entry). An unknown ``agent`` is a
    ConfigError that lists the known kinds."""
    agent = table.get("agent")
    kind = None
    if agent is not None:
        kind = KINDS.get(str(agent))
        if kind is None:
            raise ConfigError(
                f"profile {name!r}: unknown agent {agent!r} (known: {', '.join(KIND_NAMES)})",
                f"set [profiles.{name}] agent to one of them, or remove it and set command",
            )
    merged: dict[str, Any] = kind.defaults() if kind else {}
    sources = {key: f"agent {kind.name}" for key in merged} if kind else {}
    for key, value in table.items():
        if key == "env" and isinstance(value, Mapping) and isinstance(merged.get("env"), dict):
            merged["env"] = {**merged["env"], **value}
        else:
            merged[key] = value
        sources[key] = "file"
    return Profile(name, kind, merged, sources)


def launcher_of(table: Mapping[str, Any]) -> str:
    """The launcher a profile table runs with, its agent kind's default included (an unknown
    kind counts as none here: :func:`resolve` reports it)."""
    if "launcher" in table:
        return str(table["launcher"])
    kind = KINDS.get(str(table.get("agent")))
    return kind.launcher if kind else DEFAULT_LAUNCHER
