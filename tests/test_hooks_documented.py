"""Meta-tests (datasette style): every hook is documented with its exact signature, and
every hook is exercised by at least one test — called through a plugin manager or implemented
by a test plugin, not merely named somewhere in a test file."""

from __future__ import annotations

import ast
import functools
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
    assert {"register_commands", "register_delivery_backends", "register_launchers", "register_browser_targets"} <= set(
        HOOKS
    )


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_hook_is_documented_with_its_signature(name):
    doc = (ROOT / "docs" / "plugin-hooks.md").read_text()
    assert f"### {name}\n" in doc, f"docs/plugin-hooks.md has no section for {name}"
    assert HOOKS[name] in doc, f"docs/plugin-hooks.md does not show {HOOKS[name]}"


def _test_sources() -> dict[Path, str]:
    """Every Python file on the test side: test modules, their helpers and the test plugin
    packages under tests/data, of bridge and of the plugins/examples shipped with it."""
    files = list((ROOT / "tests").rglob("*.py"))
    for parent in ("plugins", "examples"):
        files += list((ROOT / parent).glob("*/tests/**/*.py"))
    return {f: f.read_text() for f in files if f.name != Path(__file__).name}


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain (calls unwrapped: ``hookimpl(x)`` -> hookimpl)."""
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def hook_evidence(name: str, sources: dict[Path, str]) -> list[str]:
    """Where a test really exercises hook ``name`` — a mention of the name is not enough:

    * ``….hook.NAME(…)``: a test calls the hook through a plugin manager;
    * ``@….hookimpl`` on ``def NAME``: a test plugin implements it — in a test module, or in
      a test plugin package under a ``tests/data/DIR`` that a test module names (to install it);
    * ``helper(…, NAME=func)`` where ``helper`` wraps its keyword functions with
      ``hookimpl(…)``: a test registers an in-memory plugin implementing it.
    """
    return _all_evidence(tuple(sources.items())).get(name, [])


@functools.cache
def _all_evidence(sources: tuple[tuple[Path, str], ...]) -> dict[str, list[str]]:
    """hook_evidence for every name at once (one pass over the test sources)."""
    trees = {path: ast.parse(text, str(path)) for path, text in sources}
    is_test = {path: path.name.startswith("test_") for path in trees}
    test_text = "\n".join(text for path, text in sources if is_test[path])
    wrappers = {
        node.name
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(n, ast.Call) and _dotted(n.func).split(".")[-1] == "hookimpl" for n in ast.walk(node))
    }
    found: dict[str, list[str]] = {}
    for path, tree in trees.items():
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and _dotted(node.func.value).endswith("hook")
                and is_test[path]
            ):
                found.setdefault(node.func.attr, []).append(f"{where}:{node.lineno} calls {_dotted(node.func)}()")
            elif isinstance(node, ast.FunctionDef) and any(
                _dotted(d).split(".")[-1] == "hookimpl" for d in node.decorator_list
            ):
                parts = path.relative_to(ROOT).parts
                package = parts[parts.index("data") + 1] if "data" in parts[:-1] else None
                if is_test[path] or (package and f'"{package}"' in test_text):
                    found.setdefault(node.name, []).append(f"{where}:{node.lineno} implements it in a test plugin")
            elif isinstance(node, ast.Call) and _dotted(node.func) in wrappers and is_test[path]:
                for keyword in node.keywords:
                    if keyword.arg:
                        found.setdefault(keyword.arg, []).append(
                            f"{where}:{node.lineno} registers an in-memory implementation"
                        )
    return found


SOURCES = _test_sources()


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_hook_is_exercised_by_a_test(name):
    assert hook_evidence(name, SOURCES), (
        f"no test calls pm.hook.{name}() or registers an implementation of {name} in a test "
        f"plugin (tests/, tests/data/<plugin>, plugins/*/tests, examples/*/tests)"
    )


def test_a_mere_mention_of_a_hook_is_not_a_test(tmp_path):
    """The check above has teeth: names in strings, comments or undecorated functions do not
    count; each of the three real forms does."""
    name = "register_launchers"
    fake = ROOT / "tests" / "fake"
    mention = {
        fake / "test_mention.py": (
            f"# {name}\nHOOK = '{name}'\ndef {name}(register):\n    pass\ndef test_x():\n    assert '{name}' in dir()\n"
        )
    }
    assert hook_evidence(name, mention) == []
    assert hook_evidence("register_no_such_hook", SOURCES) == []
    called = {fake / "test_call.py": f"def test_x(pm):\n    pm.hook.{name}(register=print)\n"}
    assert hook_evidence(name, called) == [f"tests/fake/test_call.py:2 calls pm.hook.{name}()"]
    package = fake / "data" / "demo_plugin" / "demo" / "__init__.py"
    implemented = {package: f"import bridgecli\n@bridgecli.hookimpl\ndef {name}(register):\n    pass\n"}
    assert hook_evidence(name, implemented) == []  # a test plugin no test installs
    implemented[fake / "test_demo.py"] = 'SAMPLES = ("demo_plugin",)\n'
    assert len(hook_evidence(name, implemented)) == 1
    wrapped = {
        fake / "test_wrap.py": (
            "import bridgecli\ndef fake(**hooks):\n"
            "    return [bridgecli.hookimpl(f) for f in hooks.values()]\n"
            f"def test_x():\n    fake({name}=lambda register: None)\n"
        )
    }
    assert hook_evidence(name, wrapped) == ["tests/fake/test_wrap.py:5 registers an in-memory implementation"]


@pytest.mark.parametrize("code", list(ExitCode), ids=lambda c: c.name)
def test_every_exit_code_is_documented(code):
    doc = (ROOT / "docs" / "cli.md").read_text()
    assert re.search(rf"^\| {int(code)} \| `{code.name}` \|", doc, re.M), (
        f"docs/cli.md has no table row for {code.name} = {int(code)}"
    )
