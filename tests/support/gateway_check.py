"""The teardown check of the gateways that test fixtures start.

Why: a gateway that crashes mid-test goes unnoticed otherwise, because the CLI falls back
to talking to the broker when no gateway answers. So, at teardown, each gateway the test did
not end on purpose must still be alive and exit 0 on SIGTERM, and the host's gateway logs
must hold no error-level line (nor traceback) that the test did not declare.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

#: a human-format line at error level or above (bridgecli/gateway/log.py: "HH:MM:SS level message")
_HUMAN_ERROR = re.compile(r"\d\d:\d\d:\d\d (?:error|critical) ")
_TRACEBACK = "Traceback (most recent call last):"
_ERROR_LEVELS = ("error", "critical")
TAIL_CHARS = 4000


def error_entries(text: str) -> list[str]:
    """Each error-level line of a gateway log (human or JSON format) and each Python
    traceback, the latter as one entry that ends with its exception line (so a declared
    pattern can name the exception)."""
    entries: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith(_TRACEBACK):
            block = [line]
            while i < len(lines) and lines[i].startswith((" ", "\t")):
                block.append(lines[i])
                i += 1
            if i < len(lines):
                block.append(lines[i])  # the exception line
                i += 1
            entries.append("\n".join(block))
        elif _HUMAN_ERROR.match(line) or (line.startswith("{") and _json_level(line) in _ERROR_LEVELS):
            entries.append(line)
    return entries


def _json_level(line: str) -> str | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data.get("level") if isinstance(data, dict) else None


class GatewayWatch:
    """One host's record for the teardown check: the gateway processes the test ended on
    purpose and the error lines it declared it expects its gateways to log."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.expected: list[re.Pattern[str]] = []
        self.ended: list[subprocess.Popen] = []
        #: (index of the log file, offset in it) up to which :meth:`check_stretch` has read
        self.mark = (0, 0)

    def expect_errors(self, pattern: str) -> None:
        """Allow log errors matching regex ``pattern`` (each declaration must match one)."""
        self.expected.append(re.compile(pattern))

    def end(self, proc: subprocess.Popen | None) -> None:
        """Record that the test stops, kills or crashes ``proc`` on purpose."""
        if proc is not None and not self.ended_on_purpose(proc):
            self.ended.append(proc)

    def ended_on_purpose(self, proc: subprocess.Popen) -> bool:
        return any(p is proc for p in self.ended)

    def dead_unnoticed(self, proc: subprocess.Popen | None) -> str | None:
        """Why ``proc`` counts as a crash (it exited and nobody ended it on purpose), or None."""
        if proc is None or self.ended_on_purpose(proc) or proc.poll() is None:
            return None
        return (
            f"gateway of {self.name} died mid-test (exit {proc.returncode}); a test that ends it on "
            "purpose says so: stop_gateway(), kill_gateway() or wait_gateway_exit() (a lab: stop_gateway(name))"
        )

    def problems(self, proc: subprocess.Popen | None, log: Callable[[], str], timeout: float = 20) -> list[str]:
        """The teardown check of ``proc`` (the host's last gateway, None if none is left) and of
        ``log()`` (all its gateways' logs, read once ``proc`` is stopped): one line per problem,
        empty when all is well. A live ``proc`` gets SIGTERM (SIGKILL after ``timeout`` s)."""
        found = self.process_problems(proc, stop=True, timeout=timeout)
        return found + self.log_problems(log())

    def process_problems(self, proc: subprocess.Popen | None, stop: bool, timeout: float = 20) -> list[str]:
        """``proc`` died unnoticed, or (``stop``) does not exit 0 within ``timeout`` s of SIGTERM."""
        dead = self.dead_unnoticed(proc)
        if dead:
            return [dead]
        if not stop or proc is None or proc.poll() is not None:
            return []
        code = terminate(proc, timeout)
        if code is None:
            return [f"gateway of {self.name} did not stop within {timeout:g}s of SIGTERM (killed)"]
        if code != 0:
            return [f"gateway of {self.name} exited {code} on SIGTERM, not 0"]
        return []

    def log_problems(self, text: str) -> list[str]:
        """Each error entry of ``text`` that no declaration matches, and each declaration that
        matched nothing; the declarations are used up (a lab that lives across tests checks
        each test's stretch of log against that test's declarations)."""
        found: list[str] = []
        used: set[int] = set()
        for entry in error_entries(text):
            hits = [n for n, pattern in enumerate(self.expected) if pattern.search(entry)]
            used.update(hits)
            if not hits:
                found.append(
                    f"gateway of {self.name} logged an error; if the test means it, declare it "
                    f"with expect_log_errors(PATTERN): {entry.splitlines()[-1][:300]}"
                )
        for n, pattern in enumerate(self.expected):
            if n not in used:
                found.append(f"gateway of {self.name}: expected log error {pattern.pattern!r} never logged")
        self.expected = []
        return found

    def check_stretch(self, proc: subprocess.Popen | None, logs: Sequence[Path], stop: bool) -> str | None:
        """The check for a host whose gateways outlive a test (a lab shared by several):
        ``proc`` still runs unless ended on purpose (with ``stop``: and exits 0 on SIGTERM), and
        the stretch of ``logs`` (its gateways' logs, oldest first) since the last check holds
        no undeclared error. The failure message, or None."""
        problems = self.process_problems(proc, stop)
        if problems:  # reported once: the lab may start another gateway for the next test
            self.end(proc)
        text = self.read_stretch(logs)
        problems += self.log_problems(text)
        if not problems:
            return None
        return self.report(problems, text if text.strip() or not logs else logs[-1].read_text(errors="replace"))

    def read_stretch(self, logs: Sequence[Path]) -> str:
        """The text of ``logs`` past :attr:`mark`, which moves to its end (short of a last
        line still being written: that is read next time)."""
        first, offset = self.mark
        parts = []
        for n in range(first, len(logs)):
            text = logs[n].read_text(errors="replace") if logs[n].exists() else ""
            begin = offset if n == first else 0
            end = len(text) if n < len(logs) - 1 else max(begin, text.rfind("\n") + 1)
            parts.append(text[begin:end])
            self.mark = (n, end)
        return "".join(parts)

    def report(self, problems: list[str], log_text: str) -> str:
        """The failure message: the problems, then the log's tail."""
        return "\n".join(problems) + f"\n--- gateway log of {self.name} (tail) ---\n{log_text[-TAIL_CHARS:]}"


def terminate(proc: subprocess.Popen, timeout: float) -> int | None:
    """SIGTERM ``proc`` and wait; its exit code, or None when its process group (gateways run
    in their own session) had to be SIGKILLed after ``timeout`` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)
        return None
