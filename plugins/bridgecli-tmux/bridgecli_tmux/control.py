"""A persistent tmux *control mode* client (``tmux -C``): tmux commands without a process each.

A delivery needs three or more tmux commands; forking a client for each would make it several
times slower than a bare ``send-keys`` loop. Pane text flows through here, so arguments are
double-quoted with every ASCII character but letters, digits and space octal-escaped; a block
ends only at the ``%end``/``%error`` matching its ``%begin``; the client attaches with
``no-output`` and ``ignore-size`` (tmux 3.2+); a desync, timeout or exit closes the channel
and the caller falls back to a process per command.
"""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Sequence


class ControlClosed(Exception):
    """The control client exited or fell out of step; use the per-process path."""


def quote(arg: str) -> str:
    """Quote ``arg`` for tmux's command parser so it is read back byte for byte."""
    out = ['"']
    for ch in arg:
        if ch.isascii() and not (ch.isalnum() or ch == " "):
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class ControlChannel:
    """One ``tmux -C attach-session`` process, used under a lock by any thread."""

    def __init__(self, argv: Sequence[str], *, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.lock = threading.Lock()
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        threading.Thread(target=self._pump, name="tmux-control", daemon=True).start()
        self.closed = False
        ok, lines = self._block()  # the attach command's own block
        if not ok:
            self.close()
            raise ControlClosed("; ".join(lines) or "attach failed")

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self._lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self._lines.put(None)

    def _next(self) -> str:
        try:
            line = self._lines.get(timeout=self.timeout)
        except queue.Empty:
            self.close()
            raise ControlClosed(f"tmux control client silent for {self.timeout:g}s") from None
        if line is None:
            self.close()
            raise ControlClosed("tmux control client exited")
        return line

    def _block(self) -> tuple[bool, list[str]]:
        while True:
            line = self._next()
            if line.startswith("%begin "):
                break
            if line.startswith("%exit"):
                self.close()
                raise ControlClosed("tmux control client was detached")
            if not line.startswith("%"):  # stray output outside a block: out of step
                self.close()
                raise ControlClosed("tmux control stream out of step")
        tail = line.split(" ", 1)[1]
        out: list[str] = []
        while True:
            line = self._next()
            if line == f"%end {tail}":
                return True, out
            if line == f"%error {tail}":
                return False, out
            out.append(line)

    def command(self, *args: str) -> tuple[bool, str]:
        """Run one tmux command; return (succeeded, output or error text)."""
        if self.closed:
            raise ControlClosed("closed")
        line = (args[0] + " " + " ".join(quote(a) for a in args[1:])).encode("utf-8") + b"\n"
        with self.lock:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                self.close()
                raise ControlClosed("tmux control client is gone") from None
            ok, out = self._block()
        return ok, "\n".join(out) + ("\n" if out else "")

    def close(self) -> None:
        """Detach (closing stdin ends a control client) and reap it."""
        self.closed = True
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
