"""The click-free send path (bridgecli.fast_send) must behave exactly like the click commands.

Parsing is checked without a gateway: the option sets are the click commands' own, and over
generated command lines whatever the fast parser accepts, click parses to the same values
(and where click refuses, the fast parser has declined). End to end, against a real gateway:
the fast path really runs (no click import), prints what the click path prints, and fails with
the same line and exit code; without a gateway it steps aside and click publishes directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from unittest import mock

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridgecli import fast_send, paths, socketpath
from bridgecli.cli import send as send_cli
from bridgecli.cli.app import root
from tests.support.env import BRIDGE_BIN

CLICK_COMMANDS = {"send": send_cli.send, "ask": send_cli.ask, "reply": send_cli.reply, "answer": send_cli.answer}


def _click_options(command: click.Command) -> dict[str, tuple[str, bool]]:
    options = {}
    for param in command.params:
        if isinstance(param, click.Option):
            for opt in param.opts:
                options[opt] = (param.name, not param.is_flag)
    return options


@pytest.mark.parametrize("name", sorted(CLICK_COMMANDS))
def test_option_sets_are_the_click_commands(name):
    assert fast_send.OPTIONS[name] == _click_options(CLICK_COMMANDS[name])


def _click_parse(name: str, args: list[str]) -> dict | None:
    try:
        # with the root's settings, as `bridge NAME` runs it: click caches a command's help
        # option from its first context, and `-h` must stay one for the tests that follow
        ctx = CLICK_COMMANDS[name].make_context(name, list(args), **root.context_settings)
    except click.exceptions.Exit:  # --help
        return None
    except click.ClickException:
        return None
    return dict(ctx.params)


_WORDS = st.sampled_from(
    [
        "t",
        "hello world",
        "-",
        "--",
        "-5",
        "-x",
        "--fr",
        "--from",
        "--from=me",
        "--wait",
        "-w",
        "-w10s",
        "--wait=1m",
        "10s",
        "bogus",
        "--delay",
        "--lines",
        "--id",
        "--force",
        "--turn",
        "--json",
        "-h",
        "--help",
        "--json=1",
        "",
        "=",
        "--id=abc",
        "ms",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    name=st.sampled_from(sorted(CLICK_COMMANDS)),
    args=st.lists(_WORDS, max_size=7),
    gid=st.sampled_from([None, "", "env-gid"]),
)
def test_whatever_the_fast_parser_accepts_click_parses_the_same(name, args, gid):
    env = {k: v for k, v in os.environ.items() if k != "BRIDGE_GID"}
    if gid is not None:
        env["BRIDGE_GID"] = gid
    with mock.patch.dict(os.environ, env, clear=True):
        fast = fast_send.parse([name, *args])
        slow = _click_parse(name, args)
    if fast is None:
        return
    assert slow is not None, f"fast path accepted {args!r}, click refuses it"
    command, values = fast
    assert command == name and values == slow
    if values.get("lines"):  # click's command body refuses these combinations
        assert values["message"] == "-" and not values["wait"] and not values["new_id"]


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(sorted(CLICK_COMMANDS)), args=st.lists(_WORDS, max_size=7))
def test_the_split_is_getopts_for_exact_option_names(name, args):
    """fast_send.split replaced getopt.gnu_getopt (its gettext import cost a send more than
    the parsing): where every dash-word is an exact option, both split a line the same."""
    import getopt

    options = fast_send.OPTIONS[name]
    shorts = "".join(opt[1] + (":" if takes else "") for opt, (_, takes) in options.items() if len(opt) == 2)
    longs = [opt[2:] + ("=" if takes else "") for opt, (_, takes) in options.items() if len(opt) > 2]
    env = {k: v for k, v in os.environ.items() if k != "POSIXLY_CORRECT"}
    with mock.patch.dict(os.environ, env, clear=True):
        try:
            expected = getopt.gnu_getopt(args, shorts, longs)
        except getopt.GetoptError:
            expected = None
    got = fast_send.split(args, options)
    if got is not None:
        assert expected is not None and got == (expected[0], expected[1]), args
    elif all(a.partition("=")[0] in options for a in args if a.startswith("--") and a != "--"):
        assert expected is None, args  # refused only where getopt refuses too (or took a prefix)


def test_split_bundles_flags_and_takes_values_as_getopt_does():
    options = {"-a": ("a", False), "-w": ("wait", True), "--json": ("json", False), "--from": ("from", True)}
    assert fast_send.split(["-aw5s", "x", "--from=", "y"], options) == (
        [("-a", ""), ("-w", "5s"), ("--from", "")],
        ["x", "y"],
    )
    assert fast_send.split(["-w", "--json", "x", "--", "-a"], options) == ([("-w", "--json")], ["x", "-a"])
    assert fast_send.split(["--from", "-", "-"], options) == ([("--from", "-")], ["-"])
    for refused in (["-w"], ["--from"], ["--json=1"], ["-ab"], ["--fr", "x"]):
        assert fast_send.split(refused, options) is None, refused


def test_ordinary_command_lines_take_the_fast_path():
    with mock.patch.dict(os.environ, {"BRIDGE_GID": "me"}):
        assert fast_send.parse(["send", "bob", "hi", "--json"])[1]["sender"] == "me"
        assert fast_send.parse(["ask", "--wait", "2m", "bob", "-", "--turn", "7"])[1]["wait"] == 120
        assert fast_send.parse(["ask", "bob", "why?"])[1]["question"] == "why?"
        assert fast_send.parse(["send", "bob", "-", "--lines", "--from", "x"])[1]["lines"] is True
        assert fast_send.parse(["reply", "m1", "--", "--json"])[1]["message"] == "--json"
    for declined in (
        ["send", "bob"],
        ["send", "bob", "hi", "-h"],
        ["send", "bob", "hi", "--fr", "x"],
        ["answer", "m", "x", "--wait", "1s"],
        ["send", "b", "x", "--lines"],
        ["send", "b", "hi", "--wait", "soon"],
        ["roster"],
        [],
    ):
        assert fast_send.parse(declined) is None, declined


@pytest.mark.parametrize(
    "env",
    [
        {"BRIDGE_GATEWAY_SOCKET": "/tmp/elsewhere.sock"},
        {"XDG_RUNTIME_DIR": "{tmp}"},
        {"XDG_RUNTIME_DIR": "{tmp}", "BRIDGE_GATEWAY_SOCKET": "/x/y.sock"},
        {"XDG_RUNTIME_DIR": "{tmp}/missing"},
        {},
    ],
)
def test_socket_path_is_the_one_paths_computes(env, tmp_path):
    env = {k: v.format(tmp=tmp_path) for k, v in env.items()}
    base = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "BRIDGE_GATEWAY_SOCKET")}
    with mock.patch.dict(os.environ, {**base, **env}, clear=True):
        fast = socketpath.from_environment()
        if fast is not None:
            assert fast == str(paths.gateway_socket())
        else:
            assert "XDG_RUNTIME_DIR" not in env or not os.path.isdir(env["XDG_RUNTIME_DIR"])


# --- end to end against a real gateway ------------------------------------------------------


def _click_path(host, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """The same command through the click CLI (what the console script runs when the fast
    path declines)."""
    code = "import sys; from bridgecli.cli import main; main(sys.argv[1:])"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=host.env,
        capture_output=True,
        text=True,
        input=input,
        timeout=60,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


def test_fast_path_runs_without_click_and_matches_the_click_path(host_factory):
    a = host_factory("a", extra_env={"BRIDGE_MESSAGING_MAX_CONTENT_BYTES": "100"})
    main_gid = a.register("main", role="main")
    sink = a.register("sink")
    a.start_gateway()
    probe = subprocess.run(
        [sys.executable, "-X", "importtime", BRIDGE_BIN, "send", "sink", "hi", "--from", "main"],
        env=a.env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert probe.returncode == 0, probe.stderr
    imported = {line.split("|")[-1].strip() for line in probe.stderr.splitlines() if "|" in line}
    heavy = {"click", "pika", "typing", "pathlib", "re", "enum", "json"}  # json and typing import re
    assert not imported & heavy, sorted(imported & heavy)
    # nor what a successful send does not use: socket.py, getopt (gettext), the error types
    unused = {"socket", "getopt", "gettext", "bridgecli.errors", "bridgecli.failures", "bridgecli.durations"}
    assert not imported & unused, sorted(imported & unused)

    for args in (["send", "sink", "hello", "--from", "main"], ["send", sink, "hello", "--from", main_gid, "--json"]):
        fast, slow = a.bridge(*args), _click_path(a, *args)
        assert fast.returncode == slow.returncode == 0, (fast.stderr, slow.stderr)
        if "--json" in args:
            f, s = json.loads(fast.stdout), json.loads(slow.stdout)
            assert f.keys() == s.keys() and f["to"] == s["to"] == sink
        else:
            assert len(fast.stdout.strip()) == len(slow.stdout.strip()) == 36

    bulk = a.bridge("send", "sink", "-", "--lines", "--from", "main", input="one\n\ntwo\n")
    assert bulk.returncode == 0 and len(bulk.stdout.split()) == 2, bulk.stderr

    for args in (
        ["send", "nobody", "hi", "--from", "main"],
        ["reply", "not-a-message", "x", "--from", "main"],
        ["send", "sink", "x" * 101, "--from", "main"],
        ["send", "sink", "hi", "--from", "nobody"],
    ):
        fast, slow = a.bridge(*args), _click_path(a, *args)
        assert fast.returncode == slow.returncode != 0, (args[:2], fast.stderr, slow.stderr)
        assert fast.stderr == slow.stderr and fast.stderr.startswith("bridge: error: ")
        assert fast.stdout == slow.stdout == ""


def test_without_a_gateway_the_click_path_publishes_directly(host_factory):
    a = host_factory("a")
    a.register("main", role="main")
    a.register("sink")
    sent = a.bridge("send", "sink", "queued", "--from", "main")
    assert sent.returncode == 0 and len(sent.stdout.strip()) == 36, sent.stderr
    waited = a.bridge("send", "sink", "x", "--from", "main", "--wait", "1s")
    assert waited.returncode != 0 and "--wait needs the local gateway" in waited.stderr
