"""A stand-in for an agent composer that enabled bracketed paste (DECSET 2004).

Usage: ``python paste_reader.py LOG``. Raw terminal, no echo; turns bracketed paste on and
prints READY. Keys accumulate into a submission; text between ``ESC[200~`` and ``ESC[201~``
is pasted (its newlines stay inside the submission); a CR or LF *outside* a paste submits.
Each submission is appended to LOG as one JSON line ``{"text", "pasted"}`` and printed, so
the pane shows what arrived.
"""

from __future__ import annotations

import json
import os
import sys
import termios
import tty

START, END = b"\x1b[200~", b"\x1b[201~"


def main() -> None:
    fd = sys.stdin.fileno()
    tty.setraw(fd)
    sys.stdout.write("\x1b[?2004hREADY\r\n")
    sys.stdout.flush()
    buffer, pending, in_paste, pasted = b"", b"", False, False
    try:
        while True:
            pending += os.read(fd, 4096)
            while pending:
                if pending.startswith(START):
                    in_paste, pasted, pending = True, True, pending[len(START) :]
                elif pending.startswith(END):
                    in_paste, pending = False, pending[len(END) :]
                elif (
                    pending[:1] == b"\x1b"
                    and len(pending) < len(START)
                    and (START.startswith(pending) or END.startswith(pending))
                ):
                    break  # the rest of a marker is still on its way
                elif pending[:1] in (b"\r", b"\n") and not in_paste:
                    text = buffer.decode("utf-8", "replace")
                    with open(sys.argv[1], "a", encoding="utf-8") as log:
                        log.write(json.dumps({"text": text, "pasted": pasted}) + "\n")
                    sys.stdout.write(text.replace("\r", "\n").replace("\n", "\r\n") + "\r\n")
                    sys.stdout.flush()
                    buffer, pasted, pending = b"", False, pending[1:]
                else:
                    buffer, pending = buffer + pending[:1], pending[1:]
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, termios.tcgetattr(fd))


if __name__ == "__main__":
    main()
