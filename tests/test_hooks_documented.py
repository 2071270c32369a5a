"""Meta-tests (datasette style): every hook is documented with its exact signature, and
every hook is exercised by at least one test."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from bridgecli import hookspecs
from bridgecli.errors import ExitCode

ROOT = Path(__file__).resolve().parent.parent


def hook_signatures() -> dict[str, str]:
    """hook name -> ``name(arg: Type, …) -> Return`` as written in hookspecs.py."""
    result = {}
    for name, func in vars(hookspecs).items():
        if callable(func) and hasattr(func, "bridgecli_spec"):
            notes = func.__annotations__
            params = ", ".join(f"{p}: {notes[p]}" for p in inspect.signature(func).parameters)
            result[name] = f"{name}({params}) -> {notes['return']}"
    return result


HOOKS = hook_signatures()


def test_there_are_hooks():
    assert {"register_commands", "register_delivery_backends", "register_launchers",
            "register_browser_targets"} <= set(HOOKS)


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_hook_is_documented_with_its_signature(name):
    doc = (ROOT / "docs" / "plugin-hooks.md").read_text()
    assert f"### {name}\n" in doc, f"docs/plugin-hooks.md has no section for {name}"
    assert HOOKS[name] in doc, f"docs/plugin-hooks.md does not show {HOOKS[name]}"


def _test_files() -> list[Path]:
    files = list((ROOT / "tests").rglob("test_*.py"))
    files += list((ROOT / "plugins").glob("*/tests/**/test_*.py"))
    return [f for f in files if f.name != Path(__file__).name]


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_hook_is_exercised_by_a_test(name):
    pattern = re.compile(rf"\b{name}\b")
    assert any(pattern.search(f.read_text()) for f in _test_files()), \
        f"no test under tests/ or plugins/*/tests mentions {name}"


@pytest.mark.parametrize("code", list(ExitCode), ids=lambda c: c.name)
def test_every_exit_code_is_documented(code):
    doc = (ROOT / "docs" / "cli.md").read_text()
    assert re.search(rf"^\| {int(code)} \| `{code.name}` \|", doc, re.M), \
        f"docs/cli.md has no table row for {code.name} = {int(code)}"
