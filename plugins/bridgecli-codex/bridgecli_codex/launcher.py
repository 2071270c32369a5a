"""The ``codex`` launcher: run ``codex app-server`` for a spawn and start a thread on it.

Profile keys (``launcher = "codex"``): ``command`` is the codex program (``["codex"]`` with
``agent = "codex"``, extra options such as ``-c model=...`` allowed); a first prompt (after
``--``) becomes the thread's first turn. The server listens on ``app.sock`` in a private
(0700) dir under the spawn's log dir and runs in its own session, logging to
``app-server.log``. ``codex_tui = "tmux"`` also opens the attach command (the handle's
``attach_command``) in a tmux window. ``stop`` closes that window and kills the server.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridgecli.errors import BridgeError, ConfigError, Timeout
from bridgecli.interfaces import LaunchHandle, LaunchSpec
from bridgecli.nodeprocess import pid_alive
from bridgecli_codex.backend import read_state, wait_for_message
from bridgecli_codex.client import Address, AppServer, Endpoint, RpcError, RpcTimeout, Unreachable

if TYPE_CHECKING:
    from bridgecli.config import Config

NAME = "codex"
#: seconds ``start`` waits for the server when the profile sets no ``ready_timeout``
START_TIMEOUT = 30.0
DEFAULT_TUI_SESSION = "bridge"
#: seconds ``stop`` gives the server after SIGTERM before SIGKILL
STOP_GRACE = 2.0


def split_command(command: str | list[str], where: str) -> tuple[list[str], str | None]:
    """The codex argv and the first prompt: what follows ``--`` (``prompt_args``) is the prompt."""
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    prompt = None
    if "--" in argv:
        index = argv.index("--")
        argv, rest = argv[:index], argv[index + 1 :]
        prompt = " ".join(rest) or None
    if not argv:
        raise ConfigError(f"{where}: the command names no codex program", 'set command = ["codex"]')
    return argv, prompt


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except FileNotFoundError:
        return ""
    return " | ".join(text[-lines:])[-600:]


def _alive(pid: int, socket: str) -> bool:
    """Whether ``pid`` still is the app-server that listens on ``socket`` (not a reused pid)."""
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        return waited != pid  # our child, which may not have exec'd codex yet
    except ChildProcessError:
        pass  # not our child (the gateway restarted): ask the system
    if not pid_alive(pid):
        return False
    try:
        return socket.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc here: trust the pid


def group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process of the server's process group is left; zombies
    count as gone, as the init process of a container may reap them late."""
    try:
        os.waitpid(pgid, os.WNOHANG)  # reap our own exited leader
    except ChildProcessError:
        pass  # not our child, or already reaped
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        entries = None
    if entries is None:  # no /proc here: ask the kernel about the group
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in entries:
        try:
            fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


class CodexLauncher:
    """Launcher ``codex`` (see the module docstring)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = dict(settings)

    @classmethod
    def from_config(cls, config: Config) -> CodexLauncher:
        return cls(config.plugin_settings("codex"))

    def start(self, spec: LaunchSpec) -> LaunchHandle:
        """Start the server, wait until it answers, start a thread (and the first prompt's turn)."""
        where = f"profile {spec.profile_name}"
        argv, prompt = split_command(spec.command, where)
        tui = str(spec.profile.get("codex_tui", "none"))
        if tui not in ("none", "tmux"):
            raise ConfigError(f"{where}: codex_tui = {tui!r} is not none or tmux", 'use codex_tui = "tmux"')
        run_dir = spec.log_dir / "codex"
        run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(run_dir, 0o700)
        sock = run_dir / "app.sock"
        sock.unlink(missing_ok=True)  # a symlink left by an earlier spawn of this label
        endpoint = Endpoint("unix", str(sock))
        log = run_dir / "app-server.log"
        env = {**os.environ, **spec.env}
        try:
            with os.fdopen(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
                proc = subprocess.Popen(
                    [*argv, "app-server", "--listen", endpoint.url],
                    cwd=spec.cwd or None,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                )
        except (OSError, ValueError) as exc:
            raise BridgeError(f"cannot start {argv[0]} app-server for {where}: {exc}", "check the command") from None
        data: dict[str, Any] = {"pid": proc.pid, "socket": str(sock), "log": str(log), "profile": spec.profile_name}
        try:
            timeout = float(spec.profile.get("ready_timeout") or START_TIMEOUT)
            thread_id = self._start_thread(endpoint, data, spec, prompt, timeout)
        except BaseException:
            self.stop(LaunchHandle(NAME, "", data))
            raise
        attach = [*argv, "resume", "--remote", endpoint.url, thread_id]
        data.update(thread_id=thread_id, attach=attach, attach_command=shlex.join(attach))
        handle = LaunchHandle(NAME, f"codex:{Address(endpoint, thread_id)}", data)
        if tui == "tmux":
            try:
                data.update(self._open_tui(spec, attach))
            except BaseException:
                self.stop(handle)
                raise
        return handle

    def _start_thread(
        self, endpoint: Endpoint, data: Mapping[str, Any], spec: LaunchSpec, prompt: str | None, timeout: float
    ) -> str:
        server = self._connect(endpoint, data, timeout)
        try:
            cwd = {"cwd": str(Path(spec.cwd).expanduser().resolve())} if spec.cwd else {}
            thread = (server.call("thread/start", cwd) or {}).get("thread") or {}
            if not thread.get("id"):
                raise BridgeError("codex app-server answered thread/start without a thread id", "check codex")
            server.call("thread/name/set", {"threadId": thread["id"], "name": spec.label})
            if prompt:  # in the thread before the spawn returns, so it comes before any message
                text = [{"type": "text", "text": prompt, "text_elements": []}]
                first = f"spawn-{spec.gid}"
                params = {"threadId": thread["id"], "input": text, "clientUserMessageId": first}
                turn = (server.call("turn/start", params) or {}).get("turn") or {}
                missing = wait_for_message(server, Address(endpoint, thread["id"]), str(turn.get("id")), first, timeout)
                if missing is not None:
                    raise BridgeError(f"codex did not take the first prompt ({missing})", f"check {data['log']}")
            return str(thread["id"])
        except (RpcError, RpcTimeout, Unreachable) as exc:
            raise BridgeError(
                f"codex app-server of {data['profile']} failed to start a thread: {exc}", f"check {data['log']}"
            ) from None
        finally:
            server.close()

    def _connect(self, endpoint: Endpoint, data: Mapping[str, Any], timeout: float) -> AppServer:
        """An initialized connection once the new server answers; BridgeError if it exits."""
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            if not _alive(int(data["pid"]), str(data["socket"])):
                raise BridgeError(
                    f"codex app-server of {data['profile']} exited: {_tail(Path(data['log'])) or 'no output'}",
                    "fix the profile's command (run it with app-server by hand)",
                )
            try:
                return AppServer(endpoint, max(0.5, deadline - time.monotonic()))
            except (Unreachable, RpcTimeout) as exc:
                if time.monotonic() >= deadline:
                    raise Timeout(
                        f"codex app-server of {data['profile']} did not answer within {timeout:g}s ({exc})",
                        f"check its log {data['log']}, or raise the profile's ready_timeout",
                    ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def _tmux(self) -> list[str]:
        tmux = shutil.which("tmux")
        if tmux is None:
            raise BridgeError("codex_tui = tmux, but tmux is not installed", "install tmux, or set codex_tui = none")
        socket = self.settings.get("tmux_socket") or os.environ.get("BRIDGE_TMUX_SOCKET")
        if not socket:
            return [tmux]
        return [tmux, "-S" if "/" in str(socket) else "-L", str(socket)]

    def _open_tui(self, spec: LaunchSpec, attach: list[str]) -> dict[str, Any]:
        """Open ``attach`` in a new window of ``codex_tui_session``; its pane and tmux socket."""
        tmux = self._tmux()
        session = str(spec.profile.get("codex_tui_session") or DEFAULT_TUI_SESSION)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        if subprocess.run([*tmux, "has-session", "-t", f"={session}"], env=env, capture_output=True).returncode:
            subprocess.run([*tmux, "new-session", "-d", "-s", session], env=env, capture_output=True, check=False)
        args = [
            *tmux,
            "new-window",
            "-d",
            "-n",
            spec.label[:32] or "codex",
            "-t",
            f"{session}:",
            "-P",
            "-F",
            "#{pane_id}",
        ]
        if spec.cwd:
            args += ["-c", spec.cwd]
        for key, value in spec.env.items():
            args += ["-e", f"{key}={value}"]
        done = subprocess.run([*args, "--", *attach], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise BridgeError(f"tmux could not open the Codex TUI: {done.stderr.strip()}", "check tmux, or codex_tui")
        return {"tui_pane": done.stdout.strip(), "tmux": tmux}

    def wait_ready(self, handle: LaunchHandle, timeout: float) -> None:
        """Ready = the server answers and has the thread (``start`` already waited for both)."""
        data = handle.data
        address = Address(Endpoint("unix", str(data["socket"])), str(data["thread_id"]))
        deadline = time.monotonic() + timeout
        while True:
            if not _alive(int(data["pid"]), str(data["socket"])):
                raise BridgeError(
                    f"codex app-server of {data.get('profile')} exited: {_tail(Path(data['log'])) or 'no output'}",
                    "fix the profile's command",
                )
            state = read_state(address, max(0.5, min(5.0, deadline - time.monotonic())))
            if state.status != "gone":
                return
            if time.monotonic() >= deadline:
                raise Timeout(
                    f"codex thread {address} is not ready within {timeout:g}s ({state.detail})",
                    f"check the server's log {data['log']}",
                )
            time.sleep(0.05)

    def stop(self, handle: LaunchHandle) -> None:
        """Close the TUI's window, kill the server's process group; stopping twice is fine."""
        data = handle.data
        if data.get("tui_pane"):
            subprocess.run([*data["tmux"], "kill-pane", "-t", str(data["tui_pane"])], capture_output=True, check=False)
        pid, sock = int(data["pid"]), str(data["socket"])
        if _alive(pid, sock) or group_alive(pid):
            # the whole group: node's wrapper exits at once, codex itself may wait on a model
            # request for long; its history is written as it goes, so a short grace will do
            for sig, wait in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and group_alive(pid):
                    time.sleep(0.02)
                if not group_alive(pid):
                    break
        remove_socket(Path(sock))

    def status(self, handle: LaunchHandle) -> str:
        """``gone`` when the server exited, else its thread's status (see ``read_state``)."""
        data = handle.data
        if not _alive(int(data["pid"]), str(data["socket"])) or not data.get("thread_id"):
            return "gone"
        return read_state(Address(Endpoint("unix", str(data["socket"])), str(data["thread_id"])), 5.0).status


def remove_socket(sock: Path) -> None:
    """Remove the symlink codex leaves at ``sock``, and the socket it points to with its lock
    file: a killed server leaves both in codex's shared dir. Call it once the server is gone."""
    try:
        target = Path(os.path.realpath(sock)) if sock.is_symlink() else None
        sock.unlink(missing_ok=True)
        if target is not None and stat.S_ISSOCK(target.lstat().st_mode):
            target.unlink()
            target.with_name(target.name + ".lock").unlink(missing_ok=True)
    except FileNotFoundError:
        pass
