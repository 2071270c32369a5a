"""The root command: help, version, lazy loading, errors and exit codes."""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from bridgecli import __version__
from bridgecli.cli import BUILTIN_COMMANDS, root
from tests.support.env import BRIDGE_BIN, run_bridge

HEAVY = ("pika", "websockets", "websocket", "mcp", "tomli_w")


def test_help_lists_every_builtin_command(bridge_home):
    result = CliRunner().invoke(root, ["--help"], catch_exceptions=False)
    assert result.exit_code == 0
    for name in BUILTIN_COMMANDS:
        assert f"{name}  " in result.output
    assert "-h, --help" in result.output


def test_version_in_process_and_as_subprocess(bridge_home):
    assert CliRunner().invoke(root, ["--version"]).output == f"bridge, version {__version__}\n"
    for flag in ("--version", "-V"):
        proc = run_bridge(flag, env=bridge_home.env)
        assert (proc.returncode, proc.stdout) == (0, f"bridge, version {__version__}\n")
    module = subprocess.run(
        [sys.executable, "-m", "bridgecli", "--version"], env=bridge_home.env, capture_output=True, text=True
    )
    assert module.stdout == f"bridge, version {__version__}\n"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_console_script_answers_version_without_click_byte_for_byte(bridge_home, flag):
    """bridgecli.entry answers `bridge --version` itself (the start-up goal is <= 4x a bare
    interpreter, and click alone costs about two): same bytes as click's version_option,
    and not one click module imported."""
    click_path = subprocess.run(
        [sys.executable, "-c", f"from bridgecli.cli import main; main([{flag!r}])"],
        env=bridge_home.env,
        capture_output=True,
        timeout=60,
    )
    fast = subprocess.run(
        [sys.executable, "-X", "importtime", BRIDGE_BIN, flag], env=bridge_home.env, capture_output=True, timeout=60
    )
    assert (
        (fast.returncode, fast.stdout)
        == (click_path.returncode, click_path.stdout)
        == (0, f"bridge, version {__version__}\n".encode())
    )
    imported = [
        line.rsplit("|", 1)[-1].strip() for line in fast.stderr.decode().splitlines() if line.startswith("import time:")
    ]
    assert "bridgecli.entry" in imported  # the probe really saw the console script's imports
    assert not [m for m in imported if m.split(".")[0] == "click" or m == "bridgecli.cli"], imported
    # the same through sys.modules, and through `python -m bridgecli`
    probe = (
        f"import sys\nsys.argv = ['bridge', {flag!r}]\nfrom bridgecli.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'click'), file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], env=bridge_home.env, capture_output=True, text=True, timeout=60
    )
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr


def test_version_with_other_arguments_still_goes_through_click(bridge_home):
    # only a lone --version/-V takes the fast path; anything else is click's to parse
    proc = run_bridge("--version", "--help", env=bridge_home.env)
    assert (proc.returncode, proc.stdout) == (0, f"bridge, version {__version__}\n")
    proc = run_bridge("--traceback", "--version", env=bridge_home.env)
    assert (proc.returncode, proc.stdout) == (0, f"bridge, version {__version__}\n")


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["send", "--help"]])
def test_fast_paths_import_nothing_heavy(bridge_home, argv):
    probe = (
        "import sys\nfrom bridgecli.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], env=bridge_home.env, capture_output=True, text=True, timeout=60
    )
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr


def test_version_does_not_even_load_plugins(bridge_home):
    probe = (
        "import sys\nfrom bridgecli.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print('pluggy' in sys.modules, file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], env=bridge_home.env, capture_output=True, text=True, timeout=60
    )
    assert proc.stderr.strip().splitlines()[-1] == "False"


def test_short_help_matches_each_commands_own_help():
    """BUILTIN_COMMANDS repeats each command's first help line so that --help needs no import;
    this keeps the two in step for every command module that exists."""
    checked = 0
    for name, (target, short_help) in BUILTIN_COMMANDS.items():
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # command not written yet
            raise
        command = getattr(module, attr)
        assert isinstance(command, click.Command)
        first_line = (command.help or "").strip().splitlines()[0]
        assert first_line == short_help, name
        checked += 1
    assert checked >= 4  # broker, config, doctor, plugins at least


def test_unknown_command_is_a_usage_error(bridge_home):
    proc = run_bridge("no-such-command", env=bridge_home.env)
    assert proc.returncode == 2 and "No such command 'no-such-command'" in proc.stderr


def test_bridge_error_is_one_line_with_its_exit_code_and_traceback_on_request(bridge_home):
    proc = run_bridge("config", "get", "nope.key", env=bridge_home.env)
    assert proc.returncode == 3  # ExitCode.CONFIG
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("bridge: error: unknown configuration key 'nope.key' — valid keys: broker.uri, ")
    assert proc.stderr.endswith("`bridge config show` lists every key and its value.\n")
    for args, env in (
        (["--traceback", "config", "get", "nope.key"], bridge_home.env),
        (["config", "get", "nope.key"], {**bridge_home.env, "BRIDGE_DEBUG": "1"}),
    ):
        shown = run_bridge(*args, env=env)
        assert shown.returncode != 0
        assert "Traceback (most recent call last)" in shown.stderr
        assert "ConfigError" in shown.stderr


def test_bad_env_value_names_the_variable(bridge_home):
    env = {**bridge_home.env, "BRIDGE_BROKER_HEARTBEAT": "soon"}
    proc = run_bridge("config", "get", "broker.heartbeat", env=env)
    assert proc.returncode == 3
    assert "environment variable BRIDGE_BROKER_HEARTBEAT" in proc.stderr
    assert "expected an integer" in proc.stderr


def test_json_goes_to_stdout_and_notes_to_stderr(bridge_home):
    proc = run_bridge("broker", "status", "--json", env=bridge_home.env)
    assert json.loads(proc.stdout)["running"] is False
    proc = run_bridge("broker", "status", env=bridge_home.env)
    assert proc.stdout == "stopped\n" and "bridge broker start" in proc.stderr


def test_shell_completion_is_lazy_too(bridge_home):
    env = {**bridge_home.env, "_BRIDGE_COMPLETE": "bash_complete", "COMP_WORDS": "bridge bro", "COMP_CWORD": "1"}
    probe = (
        "import sys\nfrom bridgecli.cli import main\n"
        "try:\n    main([])\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert "plain,broker" in proc.stdout.splitlines()
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr


def test_dash_h_works_on_every_command_and_subcommand(bridge_home):
    """-h is inherited from the root context by every built-in command and its subcommands."""
    runner = CliRunner()
    checked = 0
    for name, (target, _) in BUILTIN_COMMANDS.items():
        if importlib.util.find_spec(target.split(":")[0]) is None:
            continue  # command not written yet
        result = runner.invoke(root, [name, "-h"], catch_exceptions=False)
        assert result.exit_code == 0 and "Usage:" in result.output, f"bridge {name} -h"
        command = root.get_command(click.Context(root), name)
        for sub in getattr(command, "commands", {}):
            sub_result = runner.invoke(root, [name, sub, "-h"], catch_exceptions=False)
            assert sub_result.exit_code == 0, f"bridge {name} {sub} -h: {sub_result.output}"
            checked += 1
    assert checked >= 8  # broker (4) and config (5) subcommands at least
