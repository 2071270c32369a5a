"""A stand-in for an agent composer that enabled bracketed paste (DECSET 2004).

Usage: ``python paste_reader.py LOG [LATE]``. Raw terminal; prints READY. Typed keys are echoed
and gather into a submission; text between ``ESC[200~`` and ``ESC[201~`` is pasted (newlines
stay inside); a CR or LF outside a paste submits. With LATE (seconds) a paste is applied only
once no input came for that long, as Claude Code applies one late. Each submission is appended
to LOG as one JSON line ``{"text", "pasted"}``.
"""

from __future__ import annotations

import json
import os
import select
import sys
import termios
import tty

START, END = b"\x1b[200~", b"\x1b[201~"


def echo(data: bytes) -> None:
    sys.stdout.buffer.write(data.replace(b"\r", b"\n").replace(b"\n", b"\r\n"))
    sys.stdout.flush()


def main() -> None:
    fd = sys.stdin.fileno()
    late = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    tty.setraw(fd)
    sys.stdout.write("\x1b[?2004hREADY\r\n")
    sys.stdout.flush()
    buffer, pending, paste, in_paste, pasted = b"", b"", b"", False, False
    landing: bytes | None = None  # a paste not applied yet (late mode)
    try:
        while True:
            if landing is not None and not select.select([fd], [], [], late)[0]:
                echo(landing)
                buffer, landing = buffer + landing, None
                continue
            pending += os.read(fd, 4096)
            while pending:
                if pending.startswith(START):
                    in_paste, pasted, paste, pending = True, True, b"", pending[len(START) :]
                elif pending.startswith(END):
                    in_paste, pending = False, pending[len(END) :]
                    if late:
                        landing = paste
                    else:
                        buffer += paste
                        echo(paste)
                elif (
                    pending[:1] == b"\x1b"
                    and len(pending) < len(START)
                    and (START.startswith(pending) or END.startswith(pending))
                ):
                    break  # the rest of a marker is still on its way
                elif in_paste:
                    paste, pending = paste + pending[:1], pending[1:]
                elif pending[:1] in (b"\r", b"\n"):
                    text = buffer.decode("utf-8", "replace")
                    with open(sys.argv[1], "a", encoding="utf-8") as log:
                        log.write(json.dumps({"text": text, "pasted": pasted}) + "\n")
                    echo(b"\n")
                    buffer, pasted, pending = b"", False, pending[1:]
                else:
                    echo(pending[:1])
                    buffer, pending = buffer + pending[:1], pending[1:]
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, termios.tcgetattr(fd))


if __name__ == "__main__":
    main()
