"""Regenerate the configuration-keys table in README.md from ``bridgecli.config.SETTINGS``.

Run ``python scripts/gen_docs.py`` after adding or changing a setting; ``--check`` exits 1
when README.md is out of date (a test runs that).
"""

from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def settings_table() -> str:
    from bridgecli.config import SETTINGS

    lines = ["| Key | Environment | Default | Meaning |", "| --- | --- | --- | --- |"]
    for key, s in SETTINGS.items():
        default = "" if s.default is None else f"`{s.default}`"
        meaning = s.help + (f" One of: {', '.join(s.choices)}." if s.choices else "")
        lines.append(f"| `{key}` | `{s.env}` | {default} | {meaning.replace('|', '/')} |")
    return "\n".join(lines)


def render(text: str) -> str:
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    return f"{head}{START}\n{settings_table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    text = README.read_text()
    new = render(text)
    if "--check" in argv:
        if new != text:
            print("README.md settings table is out of date: run python scripts/gen_docs.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
