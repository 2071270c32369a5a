"""The README stays in step with the code: its settings table and its two commands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_settings_table_is_generated_from_the_schema():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_readme_quick_start_is_exactly_the_two_dev_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    assert block.strip().splitlines() == ["./dev run", "./dev test"]


def test_readme_names_every_runtime_dependency():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        deps += [d for d in extra if not d.startswith("bridgecli")]
    text = (ROOT / "README.md").read_text().split("## Dependencies", 1)[1]
    for dep in deps:
        name = dep.split(">")[0].split("=")[0].split("[")[0].strip()
        assert f"| {name} |" in text, f"README's Dependencies section does not explain {name}"


def test_every_third_party_import_is_declared():
    """A package bridgecli imports itself is a declared dependency (core or an extra), not
    something that happens to arrive with another one (anyio and pydantic came with mcp)."""
    import ast
    import importlib.metadata
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        declared += extra

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    declared_names = {norm(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]) for d in declared}
    distributions = importlib.metadata.packages_distributions()
    imported: dict[str, str] = {}
    for path in sorted((ROOT / "bridgecli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "bridgecli":
                    imported.setdefault(top, str(path.relative_to(ROOT)))
    assert {"click", "anyio", "pydantic"} <= set(imported)  # the scan sees real imports
    undeclared = {
        top: where
        for top, where in imported.items()
        if not {norm(d) for d in distributions.get(top, [top])} & declared_names
    }
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
