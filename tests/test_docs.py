"""The README stays in step with the code: its settings table and its two commands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_settings_table_is_generated_from_the_schema():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
                            capture_output=True, text=True)
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
