"""Every module of the package and of the bundled plugins stays within its line budget.

Small modules with self-explaining names are a rule of the codebase (``docs/architecture.md``,
"Module map"), but they are split at seams, not where a count falls: a module that is one
cohesive thing may pass :data:`MAX_LINES` when :data:`OVER_BUDGET` says why and how far.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 500
#: modules allowed past MAX_LINES: path -> (their own limit, why they are one thing)
OVER_BUDGET: dict[str, tuple[int, str]] = {
    "bridgecli/gateway/daemon.py": (
        560,
        "the Gateway object: its one loop's lifecycle and the public face every host protocol "
        "and the local API's contract describe; the parts it drives live in their own modules",
    ),
}


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


def test_no_module_is_over_its_budget():
    """Each module within MAX_LINES, or within its OVER_BUDGET entry, which must still be true:
    the module exists, needs the room, and the entry says why."""
    over = []
    for path in package_modules():
        name = path.relative_to(ROOT).as_posix()
        limit = OVER_BUDGET.get(name, (MAX_LINES, ""))[0]
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > limit:
            over.append(f"{name} ({count} lines, budget {limit})")
    assert not over, (
        f"over budget: split them at a seam, or, if one is a single cohesive thing, list it in "
        f"OVER_BUDGET with why: {', '.join(over)}"
    )
    for name, (limit, why) in OVER_BUDGET.items():
        path = ROOT / name
        assert path.is_file(), f"{name} is gone: drop it from OVER_BUDGET"
        assert len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES, f"{name} fits: drop it"
        assert limit > MAX_LINES and why.strip(), name
