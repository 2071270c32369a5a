"""Benchmark: one confirmed delivery into the real OpenCode, through its HTTP server (the
opencode plugin) against typing into its TUI in a tmux pane (the tmux backend), median of ``-n``.

OpenCode runs offline with a made-up key, so every turn fails and retries; each opencode
delivery returns once the server has stored the user message (the session's turn is then
aborted, untimed), each tmux delivery once the pane shows the frame and Enter went.
Run: ``.venv/bin/python bench/opencode_delivery.py [-n 20]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OPENCODE = ROOT / ".venv" / "agent-clis" / "node_modules" / ".bin" / "opencode"
#: the tmux backend's two ways to type a frame (its ``multiline`` setting)
MODES = ("line", "paste")
SENDER = "0b5e0000-aaaa-4bbb-8ccc-dddddddddddd"
#: the switches that keep OpenCode off the network at start (as the tests set them)
OFFLINE = ("OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_DEFAULT_PLUGINS")


def _envelope(i: int) -> Any:
    from bridgecli.envelope import Envelope

    return Envelope(kind="SEND", sender=SENDER, recipient=SENDER, content=f"message {i}", sender_label="bench")


def _entity(deliver: str, data: dict[str, Any] | None = None) -> Any:
    from bridgecli.interfaces import Entity

    return Entity(
        gid=str(uuid.uuid4()),
        label="bench",
        role="agent",
        deliver=deliver,
        host="b",
        created=time.time(),
        launch_data=data or {},
    )


def _env(tmp: Path) -> dict[str, str]:
    """OpenCode's offline environment: its own HOME and XDG dirs, a made-up key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "XDG_", "OPENCODE_"))}
    for name in ("config", "data", "state", "cache"):
        (tmp / name).mkdir()
        env[f"XDG_{name.upper()}_HOME"] = str(tmp / name)
    (tmp / "home").mkdir()
    (tmp / "project").mkdir()
    env.update(HOME=str(tmp / "home"), ANTHROPIC_API_KEY="sk-bench", **dict.fromkeys(OFFLINE, "1"))
    return env


def bench_opencode(n: int, tmp: Path, env: dict[str, str]) -> list[float]:
    """Milliseconds per opencode-backend delivery (the first, which also boots the
    server's project, is left out)."""
    from bridgecli.interfaces import LaunchSpec
    from bridgecli_opencode.backend import OpenCodeBackend, OpenCodeSettings
    from bridgecli_opencode.launcher import OpenCodeLauncher

    (tmp / "log").mkdir(mode=0o700)
    spec = LaunchSpec("g", "bench", "agent", "bench", [str(OPENCODE)], str(tmp / "project"), env, {}, tmp / "log")
    launcher = OpenCodeLauncher({})
    handle = launcher.start(spec)
    try:
        launcher.wait_ready(handle, 60)
        backend = OpenCodeBackend(OpenCodeSettings(), env={})
        entity = _entity(handle.deliver, dict(handle.data))
        _, client = backend.client_for(entity)
        abort = client.path("/session/{sid}/abort", sid=str(handle.data["session"]))
        samples = []
        for i in range(n + 1):
            started = time.perf_counter()
            backend.deliver(entity, _envelope(i))
            samples.append((time.perf_counter() - started) * 1000)
            client.request("POST", abort)  # untimed: the next one starts a turn of its own
        return samples[1:]
    finally:
        launcher.stop(handle)


def bench_tmux(n: int, tmp: Path, env: dict[str, str], multiline: str) -> tuple[list[float], int]:
    """Milliseconds per confirmed tmux-backend delivery into a fresh OpenCode TUI, with the
    backend's default settings but ``multiline`` (``paste``: header typed, body pasted;
    ``line``), and how many deliveries failed (left out of the samples)."""
    from bridgecli.agent_kinds import KINDS
    from bridgecli.errors import DeliveryError
    from bridgecli_tmux.backend import TmuxBackend, TmuxSettings
    from bridgecli_tmux.client import Tmux

    sock = str(tmp / f"tm-{multiline}")
    subprocess.run(
        ["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "b", "-x", "200", "-y", "50"]
        + ["-c", str(tmp / "project"), "--", str(OPENCODE)],
        check=True,
        env=env,
    )
    try:
        tmux = Tmux(sock)
        pane = tmux.pane("b:").pane_id
        ready = re.compile(KINDS["opencode"].ready_pattern)
        deadline = time.monotonic() + 60
        while not ready.search(tmux.capture(pane, 50)):
            if time.monotonic() > deadline:
                raise RuntimeError("OpenCode's TUI did not come up: " + tmux.capture(pane, 50)[-500:])
            time.sleep(0.1)
        backend = TmuxBackend(TmuxSettings(socket=sock, multiline=multiline))
        entity = _entity(f"tmux:{pane}")
        samples, failed = [], 0
        for i in range(n + 1):
            started = time.perf_counter()
            try:
                backend.deliver(entity, _envelope(i))
            except DeliveryError:
                failed += 1
                continue
            if i:  # the first one also switches the TUI from its home view to the session
                samples.append((time.perf_counter() - started) * 1000)
            else:
                time.sleep(2)  # keys typed during that switch are dropped: let it settle
        return samples, failed
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run both, print the medians and their ratio, return bench/run_all.py rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="deliveries per measurement")
    args = parser.parse_args([] if argv is None else argv)
    tmp = Path(tempfile.mkdtemp(prefix="boc", dir="/tmp"))
    try:
        env = _env(tmp)
        api = statistics.median(bench_opencode(args.n, tmp, env))
        runs = {m: bench_tmux(args.n, tmp, env, m) for m in MODES} if shutil.which("tmux") else {}
        typed = {m: (statistics.median(got) if got else float("nan"), failed) for m, (got, failed) in runs.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"opencode HTTP backend:               {api:8.1f} ms median of {args.n}")
    for mode, (ms, failed) in typed.items():
        print(f"tmux backend into the TUI, {mode:>5}:    {ms:8.1f} ms median, {failed} of {args.n + 1} failed")
        print(f"  ratio opencode / tmux {mode}:       {api / ms:8.3f}")
    return [
        {
            "benchmark": "opencode_delivery",
            "metric": f"one delivery into OpenCode via its HTTP API (opencode backend), median; tmux {mode}",
            "value": round(api, 1),
            "unit": "ms",
            "baseline": f"typed into OpenCode's TUI (tmux backend, multiline={mode}) {ms:.1f} ms",
            "ratio": round(api / ms, 3),
            "note": f"{args.n} deliveries, opencode 1.18.33, stored user message confirmed; "
            f"{failed} tmux deliveries failed",
        }
        for mode, (ms, failed) in typed.items()
    ]


if __name__ == "__main__":
    main(sys.argv[1:])
