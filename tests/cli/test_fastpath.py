"""The click-free TAB and ``bridge --help`` (bridgecli.cli.fastpath) print exactly what click
prints, and never answer from a snapshot that no longer matches the installed CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.shell_completion import get_completion_class

from bridgecli.cli import fastpath
from tests.cli.test_complete import A, B, C, write_roster
from tests.support.env import run_bridge


def _set_words(monkeypatch, shell: str, line: str) -> None:
    words = line.split()
    incomplete = "" if line.endswith(" ") else words[-1]
    monkeypatch.setenv("COMP_WORDS", line)
    if shell == "fish":
        monkeypatch.setenv("COMP_CWORD", incomplete)
    else:
        monkeypatch.setenv("COMP_CWORD", str(len(words) if line.endswith(" ") else len(words) - 1))


def _click_says(shell: str) -> str:
    from bridgecli.cli import root

    return get_completion_class(shell)(root, {}, "bridge", "_BRIDGE_COMPLETE").complete() + "\n"


def _lines(tree: dict) -> list[str]:
    """Command lines over the whole CLI: each command path with no word, a prefix, option
    prefixes, and one or two positional words typed."""
    lines = [
        "bridge ",
        "bridge bro",
        "bridge s",
        "bridge -",
        "bridge --",
        "bridge --h",
        "bridge nosuch ",
        "bridge send co",
        "bridge send cod",
        "bridge send bbb",
        "bridge send reviewer hi ",
        "bridge send --from ",
        "bridge send -- ",
        "bridge send --json=",
        "bridge send =",
        "bridge reply ",
        "bridge show ",
        "bridge answer ",
        "bridge spawn ",
        "bridge stop ",
        "bridge roster --host ",
        "bridge browser open ",
        "bridge browser do g1 ",
        "bridge completion ",
        "bridge completion z",
        "bridge 'send' ",
        "bridge send 'co",
    ]

    def walk(node: dict, path: str) -> None:
        lines.extend([f"{path} ", f"{path} -", f"{path} --", f"{path} x ", f"{path} x y "])
        for name, child in (node["commands"] or {}).items():
            walk(child, f"{path} {name}")

    walk(tree, "bridge")
    return lines


@pytest.fixture
def host(bridge_home):
    """A host with roster, local entity, message store and browser cache to complete from."""
    from bridgecli import cache
    from bridgecli.envelope import Envelope
    from bridgecli.hoststate.store import HELD, Store, default_path

    proc = run_bridge("register", "--label", "reviewer", "--deliver", "hold", env=bridge_home.env)
    assert proc.returncode == 0, proc.stderr
    write_roster([(A, "coder", "hb"), (B, "coder", "hc"), (C, "writer:x", "hc")])
    s = Store(default_path())
    s.record(Envelope(kind="ASK", sender=A, recipient=C, content="which\tbranch:\nnow?", sender_label="c"), HELD)
    s.close()
    cache.update_browser(groups=["g1", "g2"], targets=[{"id": "t1", "label": "chrome"}])
    return bridge_home


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_every_answer_of_the_fast_path_is_clicks(host, monkeypatch, shell):
    tree = fastpath.load()["tree"]
    answered = set()
    for line in _lines(tree):
        _set_words(monkeypatch, shell, line)
        fast = fastpath.complete(f"{shell}_complete")
        if fast is not None:
            assert fast == _click_says(shell), line
            answered.add(line)
    # the fast path must really answer the everyday cases, not hand them all to click
    assert {
        "bridge ",
        "bridge bro",
        "bridge send co",
        "bridge reply ",
        "bridge -",
        "bridge send -",
        "bridge browser open ",
        "bridge spawn ",
        "bridge completion z",
    } <= answered
    assert "bridge send --from " not in answered  # options before the word: click's parser


def test_plugin_commands_complete_and_a_stale_snapshot_is_never_used(bridge_home, tmp_path):
    """Installing a plugin into a directory on sys.path changes that directory's mtime, so
    the snapshot written before is rebuilt; so does removing it again."""
    env = {
        **bridge_home.env,
        "PYTHONPATH": str(tmp_path),
        "_BRIDGE_COMPLETE": "bash_complete",
        "COMP_WORDS": "bridge zz",
        "COMP_CWORD": "1",
    }

    def offered() -> list[str]:
        proc = subprocess.run([sys.executable, "-m", "bridgecli"], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert offered() == []
    written = list((Path(bridge_home.env["XDG_CACHE_HOME"]) / "bridge").glob(f"{fastpath.CACHE_PREFIX}*.json"))
    assert len(written) == 1
    snapshot = json.loads(written[0].read_text())
    assert "zz-fake" not in snapshot["tree"]["commands"]
    time.sleep(0.01)  # a coarse-mtime file system must see a later time
    (tmp_path / "zz_plugin.py").write_text(
        textwrap.dedent('''
        import click
        import bridgecli

        @click.command()
        def fake():
            """A fake plugin command."""

        @bridgecli.hookimpl
        def register_commands(register):
            register("zz-fake", "zz_plugin:fake", "A fake plugin command.")
    ''')
    )
    dist = tmp_path / "zz_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: zz-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[bridgecli]\nzz = zz_plugin\n")
    assert offered() == ["plain,zz-fake"]
    assert offered() == ["plain,zz-fake"]  # now from the cache
    time.sleep(0.01)
    for path in dist.iterdir():
        path.unlink()
    dist.rmdir()
    assert offered() == []


def test_snapshots_of_other_interpreters_or_paths_are_kept_apart_and_pruned(bridge_home, monkeypatch):
    first = fastpath.cache_file()
    fastpath.load()
    monkeypatch.setattr("sys.path", [*sys.path, "/nonexistent-for-key"])
    assert fastpath.cache_file() != first
    fastpath.load()
    assert Path(first).exists() and Path(fastpath.cache_file()).exists()
    for i in range(fastpath.KEEP + 2):
        monkeypatch.setattr("sys.path", [*sys.path, f"/nonexistent-{i}"])
        fastpath.save({"key": fastpath.key()})
    assert len(list(Path(first).parent.glob(f"{fastpath.CACHE_PREFIX}*.json"))) == fastpath.KEEP


def test_a_snapshot_whose_files_changed_is_rebuilt(bridge_home):
    data = fastpath.load()
    data["tree"]["commands"]["zz-stale"] = {**data["tree"]["commands"]["send"], "short_help": "stale"}
    fastpath.save(data)
    assert "zz-stale" in fastpath.load()["tree"]["commands"]  # fresh: the cache is what answers
    path, stamp = next(iter(data["depends"].items()))
    data["depends"][path] = stamp - 1  # as if that file or directory changed since
    fastpath.save(data)
    assert "zz-stale" not in fastpath.load()["tree"]["commands"]
    data = fastpath.load()
    data["key"][-1] = "another-plugin-selection"
    data["tree"]["commands"]["zz-stale"] = data["tree"]["commands"]["send"]
    fastpath.save(data)
    assert "zz-stale" not in fastpath.load()["tree"]["commands"]


@pytest.mark.parametrize("columns", ["60", "80", "200"])
def test_root_help_is_what_click_prints(bridge_home, columns):
    env = {**bridge_home.env, "COLUMNS": columns}
    click_path = subprocess.run(
        [sys.executable, "-c", "from bridgecli.cli import main; main(['--help'])"],
        env=env,
        capture_output=True,
        text=True,
    )
    for _ in range(2):  # the first run renders and caches, the second replays
        fast = run_bridge("--help", env=env)
        assert (fast.returncode, fast.stdout, fast.stderr) == (0, click_path.stdout, click_path.stderr)
    assert run_bridge("-h", env=env).stdout == click_path.stdout


def test_a_broken_plugin_is_still_reported_on_help(bridge_home, tmp_path):
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('boom')\n")
    dist = tmp_path / "broken_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[bridgecli]\nbroken = broken_plugin\n")
    env = {**bridge_home.env, "PYTHONPATH": str(tmp_path)}
    for _ in range(2):
        proc = run_bridge("--help", env=env)
        assert proc.returncode == 0 and "plugin broken failed to load" in proc.stderr


@pytest.mark.parametrize(
    "line",
    [
        "bridge send co",
        "bridge  send\tco\n",
        "bridge send\x0bx\xa0y ",
        "",
        "bridge send 'co",
        'bridge send "a b" c',
        "bridge send a\\ b",
        "bridge '",
    ],
)
def test_words_are_split_as_click_splits_them(line):
    from click.shell_completion import split_arg_string

    assert fastpath.split_arg_string(line) == split_arg_string(line)


def test_help_width_follows_clicks_rule(monkeypatch):
    import shutil

    for columns in ("10", "60", "99", "100", "300"):
        monkeypatch.setenv("COLUMNS", columns)
        assert fastpath.help_width() == max(min(shutil.get_terminal_size().columns, 100) - 2, 50)
