"""The ``opencode`` launcher: run ``opencode serve`` for a spawn, with one session in it.

The server binds 127.0.0.1 on a port it picks (read off its first output line) and requires
basic auth with a fresh random password (``OPENCODE_SERVER_PASSWORD``), stored 0600 in the
spawn's private log dir: other local users can neither read nor prompt the agent. ``start``
waits until the server answers, creates a session and returns ``opencode:URL#SESSION``; a
``--prompt=TEXT`` in the command becomes the session's first message. The handle records
the ``opencode attach`` command of the TUI; ``opencode_tui = true`` opens it in tmux.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridgecli.errors import BridgeError, ConfigError, Timeout
from bridgecli.interfaces import LaunchHandle, LaunchSpec
from bridgecli.nodeprocess import pid_alive
from bridgecli_opencode.client import DEFAULT_USERNAME, Address, Client, Refused, ServerError, new_message_id
from bridgecli_opencode.tui import attach_argv, attach_hint, kill_tui, open_tui

if TYPE_CHECKING:
    from bridgecli.config import Config

NAME = "opencode"
#: the line ``opencode serve`` prints once it listens
LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:(\d+))")
#: how long ``start`` waits for the server when the profile sets no ``ready_timeout``
DEFAULT_START_TIMEOUT = 60.0
PROMPT_FLAG = "--prompt="


def _private_file(path: Path, text: str = "") -> Path:
    """Write ``path`` readable by this user only (created 0600, never widened)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o600)
    return path


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:] if line.strip())


def start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, ``/proc/PID/stat`` field 22),
    None where /proc has no such file: a pid and this identify one process for good."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def split_command(spec: LaunchSpec) -> tuple[str, str | None]:
    """The OpenCode program and the first prompt (a ``--prompt=TEXT`` element, as the
    ``opencode`` agent kind passes it) of ``spec.command``; any other argument is a
    ConfigError, since ``opencode serve`` would not take it the way the TUI does."""
    argv = shlex.split(spec.command) if isinstance(spec.command, str) else [str(a) for a in spec.command]
    if not argv:
        raise ConfigError(f"profile {spec.profile_name}: no command", 'set command = ["opencode"]')
    prompt = None
    rest = []
    for arg in argv[1:]:
        if arg.startswith(PROMPT_FLAG) and prompt is None:
            prompt = arg[len(PROMPT_FLAG) :]
        else:
            rest.append(arg)
    if rest:
        raise ConfigError(
            f"profile {spec.profile_name}: the opencode launcher runs `{argv[0]} serve` and cannot pass {rest!r}",
            'set command = ["opencode"] and put options in opencode.json',
        )
    return argv[0], prompt


class OpenCodeLauncher:
    """Launcher ``opencode`` (see the module docstring)."""

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        self.settings = dict(settings or {})

    @classmethod
    def from_config(cls, config: Config) -> OpenCodeLauncher:
        return cls(config.plugin_settings("opencode"))

    def start(self, spec: LaunchSpec) -> LaunchHandle:
        """Start the server, wait until it answers, create the session (and post a first
        prompt); raise BridgeError with the server's last output lines when it fails."""
        binary, prompt = split_command(spec)
        try:
            timeout = float(spec.profile.get("ready_timeout") or DEFAULT_START_TIMEOUT)
        except (TypeError, ValueError):
            timeout = DEFAULT_START_TIMEOUT
        password = secrets.token_urlsafe(32)
        password_file = _private_file(spec.log_dir / "opencode-password", password + "\n")
        log = _private_file(spec.log_dir / "opencode.log")
        env = {
            **os.environ,
            **spec.env,
            "OPENCODE_SERVER_PASSWORD": password,
            "OPENCODE_SERVER_USERNAME": DEFAULT_USERNAME,
        }
        binary = shutil.which(binary, path=env.get("PATH")) or binary
        argv = [binary, "serve", "--hostname", "127.0.0.1", "--port", "0"]
        try:
            with open(log, "ab") as out:
                proc = subprocess.Popen(
                    argv,
                    cwd=spec.cwd or None,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
        except OSError as exc:
            password_file.unlink(missing_ok=True)
            raise BridgeError(
                f"cannot start {binary!r} for profile {spec.profile_name}: {exc.strerror}",
                "install OpenCode (npm i -g opencode-ai) or set the profile's command to its path",
            ) from None
        data: dict[str, Any] = {
            "pid": proc.pid,
            "started": start_time(proc.pid),
            "log": str(log),
            "password_file": str(password_file),
            "username": DEFAULT_USERNAME,
            "profile": spec.profile_name,
        }
        try:
            url = self._wait_listening(proc, log, time.monotonic() + timeout, spec.profile_name)
            client = Client(Address("http", "127.0.0.1", int(url.rsplit(":", 1)[1]), "ses_"), password)
            _, session = client.request("POST", "/session", {"title": f"bridge {spec.label}"}, timeout=timeout)
            sid = str(session["id"])
            if prompt:
                self._first_prompt(client, sid, prompt, time.monotonic() + timeout)
            data.update(url=url, session=sid, attach=attach_argv(binary, url, sid))
            data["attach_hint"] = attach_hint(binary, data)
            if spec.profile.get("opencode_tui"):
                data["tui"] = open_tui(spec, binary, data)
        except BaseException as exc:
            # whatever failed, the server must not outlive the failed spawn
            self.stop(LaunchHandle(NAME, "", data))
            if isinstance(exc, ServerError):
                raise BridgeError(
                    f"OpenCode for profile {spec.profile_name} could not set up its session: {exc.detail}",
                    f"see its log {log}",
                ) from None
            raise
        return LaunchHandle(launcher=NAME, deliver=f"opencode:{url}#{sid}", data=data)

    @staticmethod
    def _first_prompt(client: Client, sid: str, prompt: str, deadline: float) -> None:
        """Post ``prompt`` and wait until OpenCode stored it: a fresh server takes seconds
        to store its first prompt, and a message delivered meanwhile would come first."""
        message_id = new_message_id()
        body = {"messageID": message_id, "parts": [{"type": "text", "text": prompt}]}
        client.request("POST", client.path("/session/{sid}/prompt_async", sid=sid), body)
        stored = client.path("/session/{sid}/message/{mid}", sid=sid, mid=message_id)
        delay = 0.02
        while True:
            try:
                client.request("GET", stored)
                return
            except Refused as exc:
                if exc.status != 404 or time.monotonic() >= deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def _wait_listening(self, proc: subprocess.Popen[bytes], log: Path, deadline: float, profile: str) -> str:
        """The URL the server prints once it listens; BridgeError when it exits first."""
        delay = 0.02
        while True:
            try:
                found = LISTENING.search(log.read_text(errors="replace"))
            except OSError:
                found = None
            if found:
                return found.group(1)
            if proc.poll() is not None:
                raise BridgeError(
                    f"OpenCode for profile {profile} exited ({proc.returncode}) before it listened: "
                    + (_tail(log) or "no output"),
                    "fix the profile's command or OpenCode's configuration (its log is kept)",
                )
            if time.monotonic() >= deadline:
                raise Timeout(
                    f"OpenCode for profile {profile} did not listen in time: {_tail(log) or 'no output'}",
                    "raise the profile's ready_timeout, or check its log: " + str(log),
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def _client(self, handle: LaunchHandle) -> tuple[Address, Client]:
        data = handle.data
        url = str(data["url"])
        password = Path(str(data["password_file"])).read_text().strip()
        address = Address("http", "127.0.0.1", int(url.rsplit(":", 1)[1]), str(data["session"]))
        return address, Client(address, password, str(data.get("username") or DEFAULT_USERNAME))

    def wait_ready(self, handle: LaunchHandle, timeout: float) -> None:
        """Ready = the server process lives and answers for its session."""
        deadline = time.monotonic() + timeout
        pid = int(handle.data["pid"])
        delay = 0.02
        while True:
            if not self._alive(pid, handle.data.get("started")):
                raise BridgeError(
                    f"OpenCode (pid {pid}) of profile {handle.data.get('profile')} exited: "
                    f"{_tail(Path(str(handle.data['log']))) or 'no output'}",
                    "check its log: " + str(handle.data["log"]),
                )
            try:
                address, client = self._client(handle)
                client.request("GET", client.path("/session/{sid}", sid=address.session), timeout=5.0)
                return
            except (ServerError, OSError) as exc:
                last = getattr(exc, "detail", str(exc))
            if time.monotonic() >= deadline:
                raise Timeout(f"OpenCode did not answer within {timeout:g}s: {last}", "raise the spawn's --wait-ready")
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def stop(self, handle: LaunchHandle) -> None:
        """Close the TUI window, stop the server's process group (TERM, then KILL after 5 s)
        and remove the password file; stopping what is already gone is fine."""
        data = handle.data
        if isinstance(data.get("tui"), dict):
            kill_tui(data["tui"])
        pid, started = int(data.get("pid") or 0), data.get("started")
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
            if not self._alive(pid, started):
                break
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self._alive(pid, started):
                time.sleep(0.05)
        if data.get("password_file"):
            Path(str(data["password_file"])).unlink(missing_ok=True)

    def status(self, handle: LaunchHandle) -> str:
        """``gone`` once the server process ended, else ``running`` (the backend tells
        idle from working)."""
        alive = self._alive(int(handle.data.get("pid") or 0), handle.data.get("started"))
        return "running" if alive else "gone"

    @staticmethod
    def _alive(pid: int, started: Any = None) -> bool:
        """Whether ``pid`` is the live server (reaped if it is our exited child); with
        ``started`` (its start time at launch) a reused pid is not taken for it."""
        if not pid:
            return False
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return False
        except ChildProcessError:
            pass  # not our child (a restarted gateway): kill(0) and /proc decide
        return pid_alive(pid) and (started is None or start_time(pid) in (None, started))
