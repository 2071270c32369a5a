"""A stand-in for an agent TUI with an approval dialog open (Claude Code style).

Usage: ``python fake_dialog.py LOG``. Draws the dialog, reads one answer line from the
terminal and appends ``repr(answer)`` to LOG — so a test sees exactly what the dialog took as
its answer — then clears the screen and becomes ``cat`` (the agent's composer, which echoes
what is typed next).
"""

from __future__ import annotations

import os
import sys

DIALOG = """\
╭──────────────────────────────────────────────╮
│ Bash command                                 │
│                                              │
│   rm -rf build                               │
│                                              │
│ Do you want to proceed?                      │
│ ❯ 1. Yes                                     │
│   2. No, and tell Claude what to do (esc)    │
╰──────────────────────────────────────────────╯"""


def main() -> None:
    print(DIALOG, flush=True)
    answer = sys.stdin.readline()
    with open(sys.argv[1], "a", encoding="utf-8") as log:
        log.write(repr(answer) + "\n")
    print("\x1b[H\x1b[2J", end="", flush=True)  # the dialog goes away
    os.execvp("cat", ["cat"])


if __name__ == "__main__":
    main()
