"""Benchmark: one confirmed delivery into the real Codex, through its app-server (the codex
plugin) against typing into its TUI in a tmux pane (the tmux backend), median of ``-n``.

Codex 0.171 runs offline with a made-up key; its model URL is a port that never answers, so a
turn stays running. Each codex delivery starts a new turn (the turn before is interrupted,
untimed) and returns once the thread holds the message; each tmux delivery returns once the
pane shows the frame and Enter went. Run: ``.venv/bin/python bench/codex_delivery.py [-n 20]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CODEX = ROOT / ".venv" / "agent-clis" / "node_modules" / ".bin" / "codex"
SENDER = "0b5e0000-aaaa-4bbb-8ccc-dddddddddddd"


def _envelope(i: int) -> Any:
    from bridgecli.envelope import Envelope

    return Envelope(kind="SEND", sender=SENDER, recipient=SENDER, content=f"message {i}", sender_label="bench")


def _entity(deliver: str) -> Any:
    from bridgecli.interfaces import Entity

    return Entity(gid=str(uuid.uuid4()), label="bench", role="agent", deliver=deliver, host="b", created=time.time())


def _env(tmp: Path, hole: str) -> dict[str, str]:
    """codex's offline environment: own HOME/CODEX_HOME (signed in, project trusted)."""
    home, project = tmp / "home", tmp / "project"
    (home / ".codex").mkdir(parents=True)
    project.mkdir()
    (home / ".codex" / "config.toml").write_text(f'[projects."{project}"]\ntrust_level = "trusted"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=hole)
    login = [str(CODEX), "login", "--with-api-key"]
    subprocess.run(login, input="sk-bench", env=env, capture_output=True, text=True, check=True)
    return env


def bench_codex(n: int, tmp: Path, env: dict[str, str]) -> list[float]:
    """Milliseconds per codex-backend delivery, each a new turn."""
    from bridgecli.interfaces import LaunchSpec
    from bridgecli_codex.backend import CodexBackend, CodexSettings
    from bridgecli_codex.client import AppServer, parse_address
    from bridgecli_codex.launcher import CodexLauncher

    launcher = CodexLauncher({})
    spec = LaunchSpec("g", "bench", "agent", "bench", [str(CODEX)], str(tmp / "project"), env, {}, tmp / "log")
    (tmp / "log").mkdir(mode=0o700)
    handle = launcher.start(spec)
    try:
        backend = CodexBackend(CodexSettings())
        entity = _entity(handle.deliver)
        address = parse_address(handle.deliver.removeprefix("codex:"))
        samples = []
        for i in range(n + 1):
            started = time.perf_counter()
            outcome = backend.deliver(entity, _envelope(i))
            samples.append((time.perf_counter() - started) * 1000)
            with AppServer(address.endpoint, 30) as server:  # untimed: the next one starts a turn
                server.call("turn/interrupt", {"threadId": address.thread_id, "turnId": outcome.ref})
            while backend.status(entity) != "idle":
                time.sleep(0.01)
        return samples[1:]  # the first one also creates the thread's history
    finally:
        launcher.stop(handle)


def bench_tmux(n: int, tmp: Path, env: dict[str, str]) -> list[float]:
    """Milliseconds per tmux-backend delivery into Codex's TUI."""
    import re

    from bridgecli.agent_kinds import KINDS
    from bridgecli_tmux.backend import TmuxBackend, TmuxSettings
    from bridgecli_tmux.client import Tmux

    sock = str(tmp / "tm")
    command = [str(CODEX)]
    subprocess.run(
        ["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "b", "-x", "200", "-y", "50"]
        + ["-c", str(tmp / "project"), "--", *command],
        check=True,
        env=env,
    )
    try:
        tmux = Tmux(sock)
        pane = tmux.pane("b:").pane_id
        ready = re.compile(KINDS["codex"].ready_pattern)
        deadline = time.monotonic() + 60
        while not ready.search(tmux.capture(pane, 50)):
            if time.monotonic() > deadline:
                raise RuntimeError("codex's TUI did not come up: " + tmux.capture(pane, 50)[-500:])
            time.sleep(0.1)
        backend = TmuxBackend(TmuxSettings(socket=sock, confirm_timeout=15))
        entity = _entity(f"tmux:{pane}")
        samples = []
        for i in range(n + 1):
            started = time.perf_counter()
            backend.deliver(entity, _envelope(i))
            samples.append((time.perf_counter() - started) * 1000)
        return samples[1:]
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
        # the TUI started codex's managed app-server daemon in this HOME: stop it
        subprocess.run([str(CODEX), "app-server", "daemon", "stop"], env=env, capture_output=True, timeout=60)
        _kill_under(tmp)


def _daemon_dir() -> Path:
    """Where codex keeps its sockets (the paths given to --listen are symlinks into it)."""
    return Path(tempfile.gettempdir()) / f"codex-daemon-{os.getuid()}"


def _remove_dead_sockets(before: set[str]) -> None:
    """Remove the sockets (and lock files) that appeared in codex's dir during this run and
    no longer answer: SIGKILLed servers leave them behind."""
    folder = _daemon_dir()
    for path in folder.glob("*") if folder.is_dir() else []:
        if path.name in before or path.suffix == ".lock":
            continue
        probe = socket.socket(socket.AF_UNIX)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            path.unlink(missing_ok=True)
            path.with_name(path.name + ".lock").unlink(missing_ok=True)
        except OSError:
            continue
        finally:
            probe.close()


def _kill_under(tmp: Path) -> None:
    """Kill what this run started that is still running (codex's daemon), by pid."""
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(tmp).encode() in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), 9)
        except OSError:
            continue


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run both, print the medians and their ratio, return bench/run_all.py rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="deliveries per measurement")
    args = parser.parse_args([] if argv is None else argv)
    tmp = Path(tempfile.mkdtemp(prefix="bcx", dir="/tmp"))
    before = {p.name for p in _daemon_dir().glob("*")}
    hole = socket.socket()  # accepts, never answers: codex's model requests hang
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    try:
        env = _env(tmp, f"http://127.0.0.1:{hole.getsockname()[1]}/v1")
        codex = statistics.median(bench_codex(args.n, tmp, env))
        typed = statistics.median(bench_tmux(args.n, tmp, env)) if shutil.which("tmux") else float("nan")
    finally:
        hole.close()
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_dead_sockets(before)
    print(f"codex app-server backend: {codex:8.1f} ms median of {args.n}")
    print(f"tmux backend, Codex TUI:  {typed:8.1f} ms median of {args.n}")
    print(f"ratio codex / tmux:       {codex / typed:8.2f}")
    return [
        {
            "benchmark": "codex_delivery",
            "metric": "one delivery into Codex via app-server (codex backend), median",
            "value": round(codex, 1),
            "unit": "ms",
            "baseline": f"typed into Codex's TUI (tmux backend) {typed:.1f} ms",
            "ratio": round(codex / typed, 2),
            "note": f"{args.n} deliveries, codex 0.171, each a new turn",
        }
    ]


if __name__ == "__main__":
    main(sys.argv[1:])
