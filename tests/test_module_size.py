"""Every module of the package and of the bundled plugins stays under the size limit.

Small modules with self-explaining names are a rule of the codebase (``docs/architecture.md``,
"Module map"); a formatter run or a growing feature can break it silently, so the suite checks it.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 500


def package_modules() -> list[Path]:
    """The package's ``.py`` files and the plugin packages' (``plugins/*/bridgecli_*``), not
    the plugins' tests."""
    files = list((ROOT / "bridgecli").rglob("*.py"))
    for package in sorted((ROOT / "plugins").glob("*/bridgecli_*")):
        if package.is_dir():
            files += [p for p in package.rglob("*.py") if "tests" not in p.relative_to(package).parts]
    return sorted(files)


def test_the_modules_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in package_modules()}
    assert "bridgecli/config.py" in names
    assert any(name.startswith("plugins/bridgecli-tmux/bridgecli_tmux/") for name in names)


def test_no_module_is_over_the_line_limit():
    over = []
    for path in package_modules():
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > MAX_LINES:
            over.append(f"{path.relative_to(ROOT).as_posix()} ({count} lines)")
    assert not over, f"over {MAX_LINES} lines — split them into well-named modules: " + ", ".join(over)
