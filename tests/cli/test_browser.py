"""`bridge browser …` as a user runs it: real `bridge` subprocesses, a background
`bridge browser serve`, and a fake browser connected to it."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys

import pytest

from bridgecli.browser.connect import BrowserBridge
from tests.browser.conftest import free_port
from tests.browser.fake_executor import FakeExecutor
from tests.support.env import BRIDGE_BIN, run_bridge


def serve(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [BRIDGE_BIN, "browser", "serve"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


@pytest.fixture
def env(bridge_home):
    return dict(bridge_home.env, BRIDGE_BROWSER_PORT=str(free_port()))


@pytest.fixture
def served(env):
    """`bridge browser serve` hosting, plus a fake browser labelled "work"."""
    proc = serve(env)
    line = proc.stderr.readline()
    assert "hosting the browser broker" in line, line
    token = json.loads(run_bridge("token", "show", "--json", env=env).stdout)["token"]
    executor = FakeExecutor(int(env["BRIDGE_BROWSER_PORT"]), token, id="e1", label="work").start()
    yield env, executor, token
    executor.stop()
    stop(proc)


def bridge(env, *args: str) -> subprocess.CompletedProcess:
    return run_bridge("browser", *args, env=env, timeout=30)


def test_one_shot_commands_against_a_served_broker(served, tmp_path):
    env, executor, _ = served
    targets = bridge(env, "targets", "--json")
    assert targets.returncode == 0, targets.stderr
    assert json.loads(targets.stdout) == [
        {"id": "e1", "label": "work", "kind": "fake", "browser": "fake", "groups": [], "default": True}
    ]
    table = bridge(env, "targets").stdout.splitlines()
    assert table[0].split() == ["ID", "LABEL", "KIND", "DEFAULT", "GROUPS"]
    assert table[1].split() == ["e1", "work", "fake", "yes"]
    opened = bridge(env, "open", "research", "http://example.test/", "--target", "work", "--json")
    assert json.loads(opened.stdout)["url"] == "http://example.test/"
    assert executor.commands[-1]["action"] == "open" and "target" not in executor.commands[-1]
    text = bridge(env, "do", "research", "text", "selector=#main")
    assert (text.returncode, text.stdout) == (0, "text of http://example.test/\n")
    assert executor.commands[-1]["params"] == {"selector": "#main"}
    typed = bridge(env, "do", "research", "type", "selector=#q", "text=a=b", "clear:=true", "tab:=101", "--json")
    assert typed.returncode == 0 and executor.commands[-1]["params"] == {
        "selector": "#q",
        "text": "a=b",
        "clear": True,
        "tab": 101,
    }
    listing = bridge(env, "tabs")
    assert listing.stdout.split("\n")[1].split() == ["research", "work", "orphan", "yes"]
    tabs = json.loads(bridge(env, "tabs", "research", "--json").stdout)
    assert tabs[0]["tabs"][0]["url"] == "http://example.test/"
    shot = bridge(env, "do", "research", "screenshot", "-o", str(tmp_path / "s.png"))
    assert shot.returncode == 0 and (tmp_path / "s.png").read_bytes() == base64.b64decode(
        executor.answer({"id": 1, "action": "screenshot", "group": "research", "params": {}})["data"]["png"]
    )
    released = bridge(env, "release", "research")
    # a confirmation, not data: stderr, so that scripts reading stdout get nothing
    assert (released.returncode, released.stdout) == (0, "")
    assert "released group research" in released.stderr


def test_errors_are_one_line_with_exit_codes(served):
    env, executor, token = served
    unknown = bridge(env, "do", "nogroup", "text")
    assert unknown.returncode == 14
    assert unknown.stderr.startswith("bridge: error: no group 'nogroup'")
    bad_action = bridge(env, "do", "g", "eval", "code=1")
    assert bad_action.returncode == 14 and "unknown action 'eval'" in bad_action.stderr
    bad_pair = bridge(env, "do", "g", "click", "selector")
    assert bad_pair.returncode == 2 and "key=value" in bad_pair.stderr
    bad_json = bridge(env, "do", "g", "click", "tab:={")
    assert bad_json.returncode == 2
    ambiguous_free = bridge(env, "open", "g", "http://x", "--target", "nobody")
    assert ambiguous_free.returncode == 14 and "no connected browser" in ambiguous_free.stderr
    # a live agent owns a group: one-shot commands are refused with the documented words
    # (docs/design.md#browser-ownership)
    owner = BrowserBridge(int(env["BRIDGE_BROWSER_PORT"]), token, label="owner").start()
    try:
        owner.send("open", "owned", {"url": "http://o"})
        refused = bridge(env, "do", "owned", "text")
        assert refused.returncode == 14
        assert 'group "owned" is owned by another client' in refused.stderr
    finally:
        owner.close()
    assert bridge(env, "do", "owned", "text").returncode == 0  # orphaned now: adopted
    shot = bridge(env, "do", "owned", "text", "-o", "/tmp/never.png")
    assert shot.returncode == 3 and "--output only works with screenshot" in shot.stderr


def test_no_broker_fails_fast_and_says_to_serve(env):
    no_file = bridge(env, "targets")
    assert no_file.returncode == 14
    assert "does not exist yet" in no_file.stderr and "bridge browser serve" in no_file.stderr
    assert run_bridge("token", "rotate", env=env).returncode == 0
    proc = bridge(env, "open", "g", "http://x")  # a token but nobody listening
    assert proc.returncode == 14
    assert "no browser broker answers" in proc.stderr and "bridge browser serve" in proc.stderr


def test_bad_token_is_a_permission_error(served):
    env, _, _ = served
    proc = run_bridge("browser", "targets", env=dict(env, BRIDGE_BROWSER_TOKEN="wrong-" * 4))
    assert proc.returncode == 12 and "refused our token" in proc.stderr


def test_serve_processes_race_one_hosts_and_a_guest_takes_over(env):
    procs = [serve(env) for _ in range(3)]
    try:
        first = [proc.stderr.readline() for proc in procs]
        assert sum("hosting" in line for line in first) == 1, first
        assert sum("as a guest" in line for line in first) == 2, first
        index = [i for i, line in enumerate(first) if "hosting" in line][0]
        host = procs.pop(index)
        assert "generated a new bridge token" in host.stderr.readline()
        host.send_signal(signal.SIGTERM)
        host.wait(15)
        # each survivor logs the loss, then either hosting or joining: exactly one hosts
        after = [[proc.stderr.readline(), proc.stderr.readline()] for proc in procs]
        assert all("re-electing" in lines[0] for lines in after), after
        assert sorted("hosting" in lines[1] for lines in after) == [False, True], after
        assert sum("as a guest" in lines[1] for lines in after) == 1, after
        targets = bridge(env, "targets", "--json")
        assert (targets.returncode, targets.stdout.strip()) == (0, "[]"), targets.stderr
    finally:
        for proc in procs:
            stop(proc)
    assert [proc.returncode for proc in procs] == [0, 0]  # SIGTERM is a clean stop


def test_browser_help_is_lazy_and_lists_executor_commands(bridge_home):
    probe = (
        "import sys\nfrom bridgecli.cli import main\n"
        "try:\n    main(['browser', '--help'])\nexcept SystemExit:\n    pass\n"
        "print([m for m in ('websockets', 'websocket') if m in sys.modules], file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], env=bridge_home.env, capture_output=True, text=True, timeout=60
    )
    assert proc.stderr.strip().splitlines()[-1] == "[]"
    for name in ("serve", "targets", "open", "do", "tabs", "release", "launch", "attach", "extension-path"):
        assert f"  {name} " in proc.stdout


def test_short_help_matches_each_subcommands_own_help():
    import importlib

    from bridgecli.cli.browser import BROWSER_COMMANDS

    for name, (target, short_help) in BROWSER_COMMANDS.items():
        module_name, attr = target.split(":")
        try:
            command = getattr(importlib.import_module(module_name), attr)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # the executor commands live in another engineer's module
            raise
        assert command.help.strip().splitlines()[0] == short_help, name


def test_key_value_parsing():
    import click

    from bridgecli.cli.browser import _parse_pairs

    assert _parse_pairs(("a=1", "b=x=y", "c:=1", 'd:={"k": [1]}', "e=", "f:=null")) == {
        "a": "1",
        "b": "x=y",
        "c": 1,
        "d": {"k": [1]},
        "e": "",
        "f": None,
    }
    assert _parse_pairs(("url=http://x/?a:=b",)) == {"url": "http://x/?a:=b"}
    for bad in ("novalue", "=x", ":=1", "k:=nope"):
        with pytest.raises(click.BadParameter):
            _parse_pairs((bad,))
