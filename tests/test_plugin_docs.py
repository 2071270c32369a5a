"""The plugin author's documents stay usable: every hook has a working-looking example, and
the tutorial points at files that exist in the example package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_hooks_documented import HOOKS

ROOT = Path(__file__).resolve().parent.parent
HOOK_DOC = (ROOT / "docs" / "plugin-hooks.md").read_text()
TUTORIAL = (ROOT / "docs" / "writing-plugins.md").read_text()
EXAMPLE = ROOT / "examples" / "bridgecli-webhook"


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_each_hook_section_has_an_example_implementation(name):
    section = HOOK_DOC.split(f"### {name}\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    examples = re.findall(r"```python\n(.*?)```", section, re.S)
    assert any("hookimpl" in code and f"def {name}(register)" in code for code in examples), (
        f"docs/plugin-hooks.md: the {name} section has no example implementing it"
    )


def test_tutorial_names_only_files_of_the_example_that_exist():
    tree = TUTORIAL.split("```", 2)[1]  # the package tree at the top of the tutorial
    names = re.findall(r"^\s+([\w./]+\.(?:py|toml|md))\b", tree, re.M)
    assert len(names) >= 8
    for name in names:
        assert list(EXAMPLE.rglob(Path(name).name)), f"writing-plugins.md names {name}, which is not in {EXAMPLE}"


def test_example_entry_point_is_the_one_the_tutorial_shows():
    pyproject = (EXAMPLE / "pyproject.toml").read_text()
    snippet = '[project.entry-points.bridgecli]\nwebhook = "bridgecli_webhook.plugin"'
    assert snippet in pyproject and snippet in TUTORIAL
