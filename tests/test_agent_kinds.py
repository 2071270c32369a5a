"""Built-in agent kinds: how a profile merges with its kind, and how a first prompt reaches
the command line (as text, never as an option, never through a shell)."""

from __future__ import annotations

import json
import re

import pytest

from bridgecli import agent_kinds
from bridgecli.agent_kinds import KINDS, MAX_PROMPT_BYTES, check_prompt, check_prompt_args, resolve
from bridgecli.errors import ConfigError, ExitCode, Rejected
from bridgecli.requests import SpawnRequest
from tests.support.env import run_bridge

HOSTILE = ["--dangerously-skip-permissions", "-h", "--yolo", "--prompt=x", "exec", "-- -h"]

# OpenCode 1.18.33 in a 200x50 tmux pane (trimmed): the home view, which a --prompt=TEXT first
# fills, then submits, and shows empty again for a moment before the session view replaces it
OPENCODE_HOME = (
    "      \u2503\n"
    '      \u2503  Ask anything… "Fix broken tests"\n'
    "      \u2503\n"
    "      \u2503  Build · Claude Sonnet 4.6 Anthropic\n"
    "      \u2579\u2580\u2580\u2580\u2580\n"
    "                         tab agents  ctrl+p commands\n"
)
OPENCODE_HOME_WITH_PROMPT = OPENCODE_HOME.replace('Ask anything… "Fix broken tests"', "first task")
OPENCODE_SESSION = (
    "  \u2503\n"
    "  \u2503  first task                          New session - 2026-12-04T21:32:58.\n"
    "  \u2503                                      650Z\n"
    "\n"
    "     \u25a3  Build · Claude Sonnet 4.6              Context\n"
    "  \u2503\n"
    "  \u2503\n"
    "  \u2503  Build · Claude Sonnet 4.6 Anthropic      /tmp/proj\n"
    "  \u2579\u2580\u2580\u2580\u2580\n"
    "   \u25a0\u2b1d\u2b1d\u2b1d  esc interrupt           tab agents  ctrl+p commands\n"
)


def test_a_kind_profile_needs_no_command_and_runs_in_tmux() -> None:
    profile = resolve("dev", {"agent": "claude-code"})
    assert profile.launcher == "tmux"
    assert profile.command == ["claude"]
    assert profile.argv(None, "h") == ["claude"]
    assert profile.table["ready_pattern"] == KINDS["claude-code"].ready_pattern
    assert profile.sources["command"] == "agent claude-code" and profile.sources["agent"] == "file"


def test_every_key_of_the_profile_wins_and_env_entries_merge() -> None:
    kind = agent_kinds.AgentKind("demo", ("demo",), "ready", ("--", "{prompt}"), env={"A": "kind", "B": "kind"})
    KINDS["demo"] = kind
    try:
        profile = resolve(
            "dev",
            {
                "agent": "demo",
                "command": ["/opt/demo", "--fast"],
                "launcher": "subprocess",
                "ready_timeout": 5,
                "env": {"B": "file", "C": "file"},
            },
        )
    finally:
        del KINDS["demo"]
    assert profile.launcher == "subprocess"
    assert profile.table["ready_timeout"] == 5 and profile.table["ready_pattern"] == "ready"
    assert profile.table["env"] == {"A": "kind", "B": "file", "C": "file"}
    assert profile.argv("hi", "h") == ["/opt/demo", "--fast", "--", "hi"]


def test_a_profile_without_kind_keeps_the_default_launcher() -> None:
    profile = resolve("plain", {"command": "sleep 1"})
    assert profile.launcher == "subprocess" and profile.kind is None and profile.argv(None, "h") == "sleep 1"


def test_an_unknown_kind_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve("dev", {"agent": "clod"})
    assert "claude-code, codex, gemini, opencode" in caught.value.message


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("prompt", HOSTILE)
def test_a_prompt_that_looks_like_an_option_stays_one_text_argument(kind: str, prompt: str) -> None:
    argv = resolve("dev", {"agent": kind}).argv(check_prompt(prompt), "h")
    assert argv[: len(KINDS[kind].command)] == list(KINDS[kind].command)
    tail = argv[len(KINDS[kind].command) :]
    # either "--" then the prompt as one element, or one "--flag=PROMPT" element
    assert tail == ["--", prompt] or (len(tail) == 1 and tail[0].startswith("--") and tail[0].endswith("=" + prompt))


def test_the_prompt_is_one_argv_element_whatever_it_holds() -> None:
    prompt = check_prompt("line one\nline two; rm -rf / $(x) `y` {prompt}")
    argv = resolve("dev", {"agent": "claude-code"}).argv(prompt, "h")
    assert argv == ["claude", "--", "line one\nline two; rm -rf / $(x) `y` {prompt}"]


def test_control_characters_are_made_inert_and_size_is_bounded() -> None:
    assert check_prompt("go\x1b[2J\r\x03now\n\tok") == "go\u241b[2J\u240d\u2403now\n\tok"
    assert check_prompt("") is None and check_prompt(None) is None
    assert check_prompt("é" * (MAX_PROMPT_BYTES // 2)) is not None
    with pytest.raises(Rejected, match="over the 16384 byte limit"):
        check_prompt("é" * (MAX_PROMPT_BYTES // 2 + 1))
    with pytest.raises(Rejected):
        check_prompt(["--help"])
    with pytest.raises(Rejected):
        SpawnRequest(profile="dev", host="h", prompt="x" * (MAX_PROMPT_BYTES + 1))


def test_no_prompt_without_a_template_or_through_a_shell() -> None:
    with pytest.raises(ConfigError, match="takes no prompt"):
        resolve("plain", {"command": ["worker"]}).argv("hi", "h")
    with pytest.raises(ConfigError, match="through the shell"):
        resolve("dev", {"agent": "codex", "command": "codex --full-auto"}).argv("hi", "h")
    with pytest.raises(ConfigError, match="has no command"):
        resolve("empty", {"launcher": "tmux"}).argv(None, "h")
    assert resolve("dev", {"agent": "codex", "command": "codex --full-auto"}).argv(None, "h") == "codex --full-auto"


@pytest.mark.parametrize(
    "template, ok",
    [
        (["--", "{prompt}"], True),
        (["--message={prompt}"], True),
        (["--model", "x", "--", "{prompt}"], True),
        (["{prompt}"], False),
        (["-p", "{prompt}"], False),
        (["-p={prompt}"], False),
        (["--p", "{prompt}"], False),
        (["--a={prompt} and {prompt}"], False),
        (["--", "x{prompt}"], False),
        ([], False),
    ],
)
def test_prompt_args_must_place_the_prompt_where_it_cannot_be_an_option(template: list[str], ok: bool) -> None:
    if ok:
        assert check_prompt_args(template, "t") == tuple(template)
    else:
        with pytest.raises(ConfigError):
            check_prompt_args(template, "t")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_ready_pattern_compiles_and_ignores_the_first_run_dialogs(kind: str) -> None:
    pattern = re.compile(KINDS[kind].ready_pattern)
    dialogs = [
        "  Do you want to use this API key?\n    1. Yes\n  \u276f 2. No (recommended)\n",
        " \u276f 1. Yes, I trust this folder\n   2. No, exit\n",
        "› 1. Trust and continue\n  2. Back to Agent Command Center\n",
        "> 1. Sign in with ChatGPT\n",
        " \u2502 \u25cf 1. Trust folder (proj)\n",
    ]
    assert not any(pattern.search(screen) for screen in dialogs)


@pytest.mark.parametrize(
    "kind, screen",
    [
        ("claude-code", "\u2500\u2500\u2500\n\u276f\u00a0\n\u2500\u2500\u2500\n  ? for shortcuts"),
        ("codex", "  >_ OpenAI Codex\n\n› Ask Codex to do anything\n\n  ? for shortcuts"),
        ("opencode", OPENCODE_HOME),
        ("gemini", " >   Type your message or @path/to/file\n"),
    ],
)
def test_every_ready_pattern_matches_its_prompt_screen(kind: str, screen: str) -> None:
    assert re.search(KINDS[kind].ready_pattern, screen)


def test_opencode_with_a_prompt_is_ready_only_in_its_session_view() -> None:
    # keys typed while the home view gives way to the session view are lost (seen in tmux)
    kind = KINDS["opencode"]
    assert kind.prompt_ready_pattern is not None
    with_prompt = re.compile(kind.prompt_ready_pattern)
    assert not with_prompt.search(OPENCODE_HOME) and not with_prompt.search(OPENCODE_HOME_WITH_PROMPT)
    assert with_prompt.search(OPENCODE_SESSION)
    assert re.search(kind.ready_pattern, OPENCODE_HOME)
    assert not re.search(kind.ready_pattern, OPENCODE_HOME_WITH_PROMPT)


#: Gemini CLI 0.61.0 in tmux before and after it submitted a --prompt-interactive prompt
GEMINI_BEFORE = """Tips for getting started:
4. Be specific for the best results

────
 Shift+Tab to accept edits

 >   Type your message or @path/to/file

 workspace (/directory)       sandbox         /model
"""
GEMINI_AFTER = GEMINI_BEFORE.replace(
    "results\n", "results\n\n > first-d88db37f\n\n ⠋ Thinking... (esc to cancel, 0s)\n"
)


def test_gemini_with_a_prompt_is_ready_once_the_prompt_is_in_its_history() -> None:
    # a message entered while its config initialises is queued, then dropped by the argv prompt
    kind = KINDS["gemini"]
    assert kind.prompt_ready_pattern is not None
    with_prompt = re.compile(kind.prompt_ready_pattern)
    assert not with_prompt.search(GEMINI_BEFORE) and with_prompt.search(GEMINI_AFTER)
    assert re.search(kind.ready_pattern, GEMINI_BEFORE)
    typed = GEMINI_AFTER.replace(" >   Type your message or @path/to/file", " > [bridge 1234abcd] hi")
    assert not with_prompt.search(typed)


def test_the_launcher_gets_the_prompt_pattern_only_with_a_prompt_and_no_own_pattern() -> None:
    kind = KINDS["opencode"]
    profile = resolve("oc", {"agent": "opencode"})
    assert profile.launch_table(None)["ready_pattern"] == kind.ready_pattern
    assert profile.launch_table("go")["ready_pattern"] == kind.prompt_ready_pattern
    own = resolve("oc", {"agent": "opencode", "ready_pattern": "mine"})
    assert own.launch_table("go")["ready_pattern"] == "mine"
    claude = resolve("cc", {"agent": "claude-code"})
    assert claude.launch_table("go") == claude.table
    assert resolve("plain", {"command": ["w"]}).launch_table("go") == {"command": ["w"]}


@pytest.fixture
def env(bridge_home):
    return {**bridge_home.env, "BRIDGE_LOAD_PLUGINS": ""}


def test_config_set_takes_a_known_agent_and_refuses_others(bridge_home, env) -> None:
    done = run_bridge("config", "set", "profiles.dev.agent", "claude-code", env=env)
    assert done.returncode == 0, done.stderr
    refused = run_bridge("config", "set", "profiles.dev.agent", "clod", env=env)
    assert refused.returncode == ExitCode.CONFIG
    assert "one of claude-code, codex, gemini, opencode" in refused.stderr and len(refused.stderr.splitlines()) == 1
    bad = run_bridge("config", "set", "profiles.dev.prompt_args", '["-p", "{prompt}"]', env=env)
    assert bad.returncode == ExitCode.CONFIG and "option" in bad.stderr
    assert run_bridge("config", "set", "profiles.dev.prompt", "review the open PRs", env=env).returncode == 0

    got = json.loads(run_bridge("config", "get", "profiles.dev.command", "--json", env=env).stdout)
    assert got == {"key": "profiles.dev.command", "value": ["claude"], "source": "agent claude-code"}
    shown = json.loads(run_bridge("config", "show", "--json", env=env).stdout)
    rows = {r["key"]: r for r in shown["settings"]}
    assert rows["profiles.dev.agent"]["source"] == str(bridge_home.config_file)
    assert rows["profiles.dev.launcher"] == {**rows["profiles.dev.launcher"], "value": "tmux"}
    assert rows["profiles.dev.launcher"]["source"] == "agent claude-code"
    assert rows["profiles.dev.prompt_args"]["value"] == ["--", "{prompt}"]
