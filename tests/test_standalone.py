"""The repository explains itself: no pointer to documents outside it, short docstrings.

Code and docs cite the design as ``docs/design.md#anchor``; a reference to a design document,
research note, shared folder or issue tracker that a reader of this repository cannot open is a
dead end. Docstrings state a contract and one line of why; histories go to ``docs/decisions/``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ["bridgecli", "plugins", "examples", "docs", "README.md", "bench", "scripts", "tests"]
DOCSTRING_ROOTS = ["bridgecli", "plugins", "examples"]
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".html", ".js", ".css", ".json", ".cfg", ".sh"}
SKIPPED_PARTS = {"__pycache__", ".venv", "node_modules", ".pytest_cache"}
MAX_DOCSTRING_WORDS = 100

OUTSIDE = [
    (re.compile(r"\bseeds?\b", re.I), "a design seed"),
    (re.compile(r"\bresearch/"), "a research note"),
    (re.compile(r"(?<![\w.])shared/"), "a shared folder"),
    (re.compile(r"§"), "a section of a document (use a link with an anchor)"),
    (re.compile(r"\bissues?\s+#?\d+", re.I), "an issue number"),
    (re.compile(r"(?:^|[\s(])#(?!\d{3};|\d{6};)\d+\b(?![\w-])"), "an issue number"),  # not a CSS colour
    (re.compile(r"\bCB-\d+\b"), "a ticket"),
    (
        re.compile(
            r"(?:cross-host-messaging|multi-client-routing|browser-feasibility|broker-baseline"
            r"|herdr-workflow)(?:\.md)?|\bherdr\.md\b"
        ),
        "an outside document",
    ),
]
DESIGN_LINK = re.compile(r"design\.md#([A-Za-z0-9_-]+)")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _files(roots: list[str], suffixes: set[str]) -> list[Path]:
    found = []
    for name in roots:
        top = ROOT / name
        paths = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in paths:
            parts = set(path.relative_to(ROOT).parts)
            if (
                path.is_file()
                and path.suffix in suffixes
                and not parts & SKIPPED_PARTS
                and not any(p.endswith(".egg-info") for p in parts)
            ):
                found.append(path)
    return found


def _outside_references(path: Path) -> list[str]:
    hits = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        for pattern, what in OUTSIDE:
            if pattern.search(line):
                hits.append(f"{_rel(path)}:{number}: {what}: {line.strip()[:100]}")
    return hits


def _long_docstrings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc and len(doc.split()) > MAX_DOCSTRING_WORDS:
                name = getattr(node, "name", "<module>")
                hits.append(f"{_rel(path)}: {name}: {len(doc.split())} words")
    return hits


def test_nothing_points_outside_the_repository():
    hits = [
        h
        for path in _files(SCANNED, TEXT_SUFFIXES)
        if path != Path(__file__).resolve()
        for h in _outside_references(path)
    ]
    assert not hits, (
        "these lines point at documents outside the repository; cite "
        "docs/design.md#… or another repo doc instead:\n" + "\n".join(hits)
    )


def test_docstrings_state_a_contract_in_at_most_100_words():
    hits = [h for path in _files(DOCSTRING_ROOTS, {".py"}) for h in _long_docstrings(path)]
    assert not hits, (
        "docstrings over 100 words; keep the contract and one line of why, move "
        "histories and measurements to docs/decisions/:\n" + "\n".join(hits)
    )


def test_every_cited_design_anchor_exists():
    design = (ROOT / "docs" / "design.md").read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', design))
    for heading in re.findall(r"^#+ (.+)$", design, re.M):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    cited = {}
    for path in _files(SCANNED, TEXT_SUFFIXES):
        if path == Path(__file__).resolve():
            continue
        for anchor in DESIGN_LINK.findall(path.read_text(errors="replace")):
            cited.setdefault(anchor, _rel(path))
    missing = {a: where for a, where in cited.items() if a not in anchors}
    assert not missing, f"docs/design.md has no anchor for: {missing}"
