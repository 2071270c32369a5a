"""Regenerate ``completions/`` (bash, zsh, fish) from click — never edit those files by hand.

``python scripts/gen_completions.py`` rewrites them; ``--check`` exits 1 when a checked-in
script differs from what click generates now (a test runs that), e.g. after a click upgrade
changed its templates.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "completions"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from bridgecli.cli.completion import SHELLS, script

    stale = []
    for shell, name in sorted(SHELLS.items()):
        path = OUT / name
        text = script(shell)
        if "--check" in argv:
            if not path.exists() or path.read_bytes() != text.encode():
                stale.append(str(path.relative_to(ROOT)))
            continue
        OUT.mkdir(exist_ok=True)
        path.write_bytes(text.encode())
    if stale:
        print(f"out of date: {', '.join(stale)} — run python scripts/gen_completions.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
