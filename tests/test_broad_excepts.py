"""A broad ``except`` that swallows everything says why, in a comment.

``except Exception: pass`` hides bugs along with the failure it was written for; where one is
right (closing what already broke, a plugin's surprise), a comment on the ``except`` or the
``pass`` line states it, so a reader can tell the deliberate ones from the careless ones.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_module_size import ROOT, package_modules

BROAD = {"Exception", "BaseException"}


def _silent_broad_handlers(path: Path) -> list[int]:
    """Lines of ``except Exception`` / ``BaseException`` / bare ``except`` whose whole body is
    ``pass``, with no comment on any of the handler's lines."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ExceptHandler):
            continue
        broad = node.type is None or (isinstance(node.type, ast.Name) and node.type.id in BROAD)
        silent = all(isinstance(statement, ast.Pass) for statement in node.body)
        said = any("#" in line for line in lines[node.lineno - 1 : node.end_lineno])
        if broad and silent and not said:
            found.append(node.lineno)
    return found


def test_the_check_sees_a_silent_broad_except(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "try:\n    x = 1\nexcept Exception:\n    pass\n"
        "try:\n    x = 2\nexcept Exception:  # closing what already broke\n    pass\n"
        "try:\n    x = 3\nexcept OSError:\n    pass\n"
        "try:\n    x = 4\nexcept BaseException:\n    pass  # a goodbye to a dead peer\n"
        "try:\n    x = 5\nexcept:\n    pass\n"
    )
    assert _silent_broad_handlers(sample) == [3, 19]


def test_every_silent_broad_except_says_why():
    silent = [
        f"{path.relative_to(ROOT).as_posix()}:{line}"
        for path in package_modules()
        for line in _silent_broad_handlers(path)
    ]
    assert not silent, "say in a comment why swallowing every error is right: " + ", ".join(silent)
