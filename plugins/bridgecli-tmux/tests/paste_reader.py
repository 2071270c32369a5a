"""A stand-in for an agent composer that enabled bracketed paste (DECSET 2004).

Usage: ``python paste_reader.py LOG [LATE [BURST]]``. Raw terminal; prints READY. Typed keys
are echoed and gather into a submission; text between ``ESC[200~`` and ``ESC[201~`` is pasted
(newlines stay inside); a CR or LF outside a paste submits. With LATE (seconds), as Claude Code:
what arrives is drawn only once input pauses that long, and a paste, or more than BURST typed
characters read at once, is applied only then (keys meanwhile act without it). Each submission
is appended to LOG as one JSON line ``{"text", "pasted"}``.
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


class Composer:
    """The submission being composed: what is applied, what is not drawn yet, what lands late."""

    def __init__(self, log: str, late: float, burst: int) -> None:
        self.log, self.late, self.burst = log, late, burst
        self.buffer, self.unshown, self.landing, self.pasted = b"", b"", b"", False

    def apply(self, data: bytes, paste: bool) -> None:
        """Typed keys (all that one read brought) or a finished paste."""
        if not self.late:
            self.buffer += data
            echo(data)
        elif paste or (self.burst and len(data) > self.burst):
            self.landing += data
        else:
            self.buffer, self.unshown = self.buffer + data, self.unshown + data

    def settle(self) -> None:
        """Input paused: apply what was landing and draw everything."""
        self.buffer += self.landing
        echo(self.unshown + self.landing)
        self.unshown, self.landing = b"", b""

    def submit(self) -> None:
        """Append the submission by replacing LOG whole, so a reader never sees it half written."""
        line = json.dumps({"text": self.buffer.decode("utf-8", "replace"), "pasted": self.pasted}) + "\n"
        before = open(self.log, encoding="utf-8").read() if os.path.exists(self.log) else ""
        with open(f"{self.log}.part", "w", encoding="utf-8") as part:
            part.write(before + line)
        os.replace(f"{self.log}.part", self.log)
        echo(self.unshown + b"\n")
        self.buffer, self.unshown, self.pasted = b"", b"", False


def main() -> None:
    fd = sys.stdin.fileno()
    late = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    composer = Composer(sys.argv[1], late, int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    tty.setraw(fd)
    sys.stdout.write("\x1b[?2004hREADY\r\n")
    sys.stdout.flush()
    pending, paste, typed, in_paste = b"", b"", b"", False
    try:
        while True:
            if (composer.landing or composer.unshown) and not select.select([fd], [], [], late)[0]:
                composer.settle()
                continue
            pending += os.read(fd, 4096)
            while pending:
                if pending.startswith(START):
                    composer.apply(typed, False)
                    typed, in_paste, composer.pasted, paste = b"", True, True, b""
                    pending = pending[len(START) :]
                elif pending.startswith(END):
                    in_paste, pending = False, pending[len(END) :]
                    composer.apply(paste, True)
                elif (
                    pending[:1] == b"\x1b"
                    and len(pending) < len(START)
                    and (START.startswith(pending) or END.startswith(pending))
                ):
                    break  # the rest of a marker is still on its way
                elif in_paste:
                    paste, pending = paste + pending[:1], pending[1:]
                elif pending[:1] in (b"\r", b"\n"):
                    composer.apply(typed, False)
                    typed, pending = b"", pending[1:]
                    composer.submit()
                else:
                    typed, pending = typed + pending[:1], pending[1:]
            composer.apply(typed, False)  # what this read brought: one burst
            typed = b""
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, termios.tcgetattr(fd))


if __name__ == "__main__":
    main()
