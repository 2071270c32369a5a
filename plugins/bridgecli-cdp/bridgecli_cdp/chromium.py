"""Start and stop a private Chromium with remote debugging on a free port.

``--remote-debugging-port=0`` plus the profile's ``DevToolsActivePort`` file avoids port
races; the process gets its own session so :meth:`Chromium.stop` can kill the whole tree
(renderers, GPU, zygote) and never leave strays. The flags are the ones that work as root on
a closed network (see docs: without the background-networking flags Chromium keeps dialling
out and connections get refused).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bridgecli.errors import BrowserError, MissingDependency

CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome")

BASE_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,800",
)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL Chromium if the process that started it dies (even by
    SIGKILL, when no ``finally`` runs). Linux only; elsewhere a no-op."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # pre-exec: raising would abort the launch; the guard is best effort
        pass


def find_binary(explicit: str | None = None) -> str:
    """The Chromium executable: ``explicit`` ([plugins.cdp] binary), ``$BRIDGE_CHROMIUM``, then
    the usual names. An explicitly chosen binary that is missing is an error, never skipped."""
    for source, chosen in (("[plugins.cdp] binary", explicit), ("BRIDGE_CHROMIUM", os.environ.get("BRIDGE_CHROMIUM"))):
        if chosen:
            path = chosen if os.path.isabs(chosen) else shutil.which(chosen)
            if not path or not os.access(path, os.X_OK):
                raise MissingDependency(
                    f"{source} names {chosen}, which is not an executable",
                    "fix the path or unset it to use the installed Chromium",
                )
            return path
    for candidate in CANDIDATES:
        path = candidate if os.path.isabs(candidate) else shutil.which(candidate)
        if path and os.access(path, os.X_OK):
            return path
    raise MissingDependency("no Chromium found", "install it (apt-get install chromium) or set BRIDGE_CHROMIUM=/path")


class Chromium:
    """One Chromium process with a throwaway profile; a context manager."""

    def __init__(
        self,
        *,
        headless: bool = True,
        extra_args: Sequence[str] = (),
        binary: str | None = None,
        start_url: str = "about:blank",
    ) -> None:
        self.binary = find_binary(binary)
        self.headless = headless
        self.extra_args = list(extra_args)
        self.start_url = start_url
        self.profile: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT`` of the DevTools HTTP endpoint."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> Chromium:
        self.profile = Path(tempfile.mkdtemp(prefix="bridge-chromium-"))
        args = [
            self.binary,
            *BASE_FLAGS,
            f"--user-data-dir={self.profile}",
            "--remote-debugging-port=0",
            *self.extra_args,
        ]
        if self.headless:
            args.insert(1, "--headless=new")
        args.append(self.start_url)
        # Own session: stop() kills the whole tree with one killpg. PDEATHSIG: a parent killed
        # with SIGKILL still takes its browser along. (It fires when the *thread* that started
        # Chromium exits, so start it from a thread that lives as long as the browser.)
        log = open(self.profile / "chromium.log", "wb")  # noqa: SIM115 (closed right below)
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        log.close()
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code, why = self.proc.returncode, self._why()
                self.stop()
                if "Missing X server" in why:
                    raise BrowserError(
                        "Chromium cannot open a window: no display ($DISPLAY unset)",
                        "pass --headless, or run it inside a desktop session",
                    )
                raise BrowserError(
                    f"Chromium exited at start (code {code}): {why or 'no message'}",
                    "run it by hand with the same flags to see more",
                )
            try:
                lines = marker.read_text().splitlines()
                if len(lines) >= 2:
                    self.port = int(lines[0])
                    return self
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.05)
        self.stop()
        raise BrowserError(
            f"Chromium did not open its DevTools port within {timeout:g} s", "the machine may be overloaded; retry"
        )

    def _why(self) -> str:
        """The first real error line Chromium logged (dbus and zygote noise skipped)."""
        if self.profile is None:  # not started
            return ""
        try:
            lines = (self.profile / "chromium.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        noise = ("dbus", "zygote", "Fontconfig")
        errors = [line.split("] ", 1)[-1] for line in lines if "ERROR" in line and not any(n in line for n in noise)]
        return errors[0] if errors else (lines[-1] if lines else "")

    @property
    def pid(self) -> int | None:
        """The browser's process id; None before start and after stop."""
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Kill the whole process tree and remove the profile (idempotent).

        SIGTERM to the group first (Chromium flushes its profile), SIGKILL to whatever is
        left after 5 s, and wait until the group is empty, so no renderer outlives us.
        """
        proc, self.proc = self.proc, None
        if proc is not None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
            deadline = time.monotonic() + 5
            while _group_alive(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _group_alive(proc.pid):
                _signal_group(proc.pid, signal.SIGKILL)
        if self.profile is not None:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None

    def __enter__(self) -> Chromium:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (zombies do not count)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
