"""Register -> inbox consumable on a host joined to a hub, against a host that never claims.

Measured: the ``register`` op on the joined host's gateway socket, call to return (the
inbox is then declared and consumed): it first claims the gid at the hub's registrar.
Baseline, same run, interleaved: the same register on a host with every permission on the
same broker and TLS listener and no ``hub.id``. p50/p95/p99 after 5 warm-ups per host.
Why: the grant that follows registration must stay cheap. Setup and method in
docs/benchmarks.md ("Hub: register on a joined host"). Run:
``.venv/bin/python bench/hub_register.py [--rounds N] [--json [FILE]]``; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV_BIN = Path(sys.executable).parent
BRIDGE = str(VENV_BIN / "bridge")
NAME = Path(__file__).stem
ROUNDS, WARMUP, CHECK_EVERY = 60, 5, 10

if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))
if str(BENCH) not in sys.path:  # run_all loads the scripts by path
    sys.path.insert(0, str(BENCH))

from _common import Column, pct, print_table  # noqa: E402


def _processes_under(root: Path) -> list[int]:
    """Pids whose environment points into ``root`` (gateways, the node, the registrar); not
    epmd, which every Erlang node on the machine shares (bridge stops it once idle)."""
    mine = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if str(root).encode() + b"/" in (proc / "environ").read_bytes() \
                    and b"epmd" not in (proc / "cmdline").read_bytes():
                mine.append(int(proc.name))
        except OSError:
            pass
    return mine


class Home:
    """One simulated host: its own XDG dirs (as tests/support/env.py's make_home) and gateway."""

    def __init__(self, root: Path, name: str, host_id: str | None = None) -> None:
        self.name, self.root = name, root / name
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("BRIDGE_", "XDG_", "OCB_")) and k != "PYTHONDONTWRITEBYTECODE"}
        for part in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
            path = self.root / part.lower()
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.env[f"XDG_{part}_{'DIR' if part == 'RUNTIME' else 'HOME'}"] = str(path)
        if host_id:
            self.env["BRIDGE_HOST_ID"] = host_id
        self.proc: subprocess.Popen | None = None
        self.log_path = self.root / "gateway.log"

    @property
    def socket(self) -> Path:
        return Path(self.env["XDG_RUNTIME_DIR"]) / "bridge" / "gateway.sock"

    def bridge(self, *args: str, timeout: float = 180) -> str:
        proc = subprocess.run([BRIDGE, *args], check=False, env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise RuntimeError(f"{self.name}: bridge {' '.join(args[:2])} exited {proc.returncode}: "
                               f"{proc.stderr.strip()[-2000:]}")
        return proc.stdout

    def start_gateway(self, timeout: float = 60) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([BRIDGE, "gateway"], env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name}: gateway exited {self.proc.returncode}: {self.log()}")
            if "connected to broker" in self.log() and self.socket.exists():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name}: gateway not connected after {timeout}s: {self.log()}")

    def stop_gateway(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""


def setup(root: Path, homes: dict[str, Home]) -> str:
    """Hub A, joined B and full-permission C in ``homes`` (filled as they start, so a failed
    set-up is still cleaned up), gateways connected; returns A's loopback guest URI."""
    from bridgecli.hub.rabbitadmin import RabbitAdmin

    a, b, c = Home(root, "A", "hosta"), Home(root, "B"), Home(root, "C")
    homes.update(A=a, B=b, C=c)
    a.bridge("hub", "start", "--listen", "127.0.0.1")
    a.start_gateway()
    b.bridge("join", a.bridge("hub", "invite", "hostb").strip())
    b.start_gateway()
    status = json.loads(a.bridge("hub", "status", "--json"))
    password = secrets.token_urlsafe(24)
    admin = RabbitAdmin(int(status["broker"]["management_port"]))
    admin.put_user("hostc", password)
    admin.set_permissions("hostc", ".*", ".*", ".*")
    port = status["addresses"][0].rsplit(":", 1)[1]
    ca = b.bridge("config", "get", "broker.tls_ca").strip()
    for key, value in (("broker.uri", f"amqps://hostc:{password}@127.0.0.1:{port}/"),
                       ("broker.tls_ca", ca), ("host.id", "hostc")):
        c.bridge("config", "set", key, value)
    c.start_gateway()
    return json.loads(a.bridge("broker", "status", "--json"))["uri"]


def run(rounds: int = ROUNDS, warmup: int = WARMUP) -> dict[str, Any]:
    """The samples: ``register`` ms per case, the consumer checks, the set-up time."""
    import pika

    from bridgecli.gateway.client import GatewayClient

    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="bhr", dir="/tmp"))  # short: socket paths have a limit
    homes: dict[str, Home] = {}
    result: dict[str, Any] = {"rounds": rounds, "warmup": warmup, "ms": {"B": [], "C": []},
                              "checks": {"B": [0, 0], "C": [0, 0]}}  # [consumable, checked]
    try:
        guest_uri = setup(root, homes)
        result["setup_s"] = time.monotonic() - started
        clients = {case: GatewayClient.require(homes[case].socket) for case in ("B", "C")}
        guest = pika.BlockingConnection(pika.URLParameters(guest_uri))
        channel = guest.channel()
        for i in range(-warmup, rounds):
            for case in ("B", "C") if i % 2 == 0 else ("C", "B"):
                t0 = time.perf_counter()
                answer = clients[case].call("register", label=f"r{i + warmup}", role="agent", deliver="hold")
                ms = (time.perf_counter() - t0) * 1000
                gid = answer["entity"]["gid"]
                if i >= 0:
                    result["ms"][case].append(ms)
                if i >= 0 and i % CHECK_EVERY == 0:
                    try:
                        consumers = channel.queue_declare(f"agent.{gid}.inbox", passive=True).method.consumer_count
                    except pika.exceptions.ChannelClosedByBroker:  # 404: no such inbox
                        consumers, channel = 0, guest.channel()
                    result["checks"][case][0] += consumers == 1
                    result["checks"][case][1] += 1
                clients[case].call("unregister", target=gid)
        for client in clients.values():
            client.close()
        guest.close()
    finally:
        for home in homes.values():
            home.stop_gateway()
        if "A" in homes:
            try:
                homes["A"].bridge("hub", "stop", timeout=120)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:  # still remove the dirs
                print(f"{NAME}: bridge hub stop failed: {exc}", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)
        left = _processes_under(root)
        if left:
            print(f"{NAME}: still running from {root}: pids {left}", file=sys.stderr)
    result["total_s"] = time.monotonic() - started
    return result


def rows_from(result: dict[str, Any]) -> list[dict[str, Any]]:
    """run_all rows: the joined host's p50/p95/p99 against the full-permission host's."""
    b, c = result["ms"]["B"], result["ms"]["C"]
    (ok_b, n_b), (ok_c, n_c) = result["checks"]["B"], result["checks"]["C"]
    note = (f"{len(b)} interleaved rounds + {result['warmup']} warm-ups, register op on the gateway socket "
            f"until inbox declared+consumed; inbox had 1 consumer in {ok_b}/{n_b} (joined) and "
            f"{ok_c}/{n_c} (baseline) checks")
    rows = []
    for label, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        value, base = pct(b, q), pct(c, q)
        rows.append({"benchmark": NAME,
                     "metric": f"register -> inbox consumable, joined host (registrar claim), {label}",
                     "value": round(value, 2), "unit": "ms",
                     "baseline": f"full-permission host, no claim, {label} {base:.2f} ms",
                     "ratio": round(value / base, 3) if base else None, "note": note})
    return rows


TABLE = (Column("case", 10, lambda r: r["case"]),
         *(Column(f"{q} ms", 8, lambda r, q=q: f"{r[q]:.2f}", ">") for q in ("p50", "p95", "p99")),
         Column("p50 vs C", 9, lambda r: f"{r['vs']:.2f}x", ">"),
         Column("consumable", 10, lambda r: r["consumable"], ">"),
         Column(" note", 0, lambda r: " " + r["note"]))


def show_table(result: dict[str, Any]) -> None:
    base = pct(result["ms"]["C"], 0.5)
    notes = {"B": "joined host: registrar claim (AMQP direct reply-to + management API) first",
             "C": "baseline: same broker and TLS, full permissions, no hub.id (never claims)"}
    rows = []
    for case, title in (("B", "joined"), ("C", "baseline")):
        ms, (ok, n) = result["ms"][case], result["checks"][case]
        rows.append({"case": title, "p50": pct(ms, .5), "p95": pct(ms, .95), "p99": pct(ms, .99),
                     "vs": pct(ms, .5) / base, "consumable": f"{ok}/{n}", "note": notes[case]})
    print_table(rows, TABLE)
    print(f"{len(result['ms']['B'])} rounds per case, interleaved; set-up {result.get('setup_s', 0):.0f} s, "
          f"whole run {result['total_s']:.0f} s")


def main(rounds: int = ROUNDS) -> list[dict[str, Any]]:
    """Rows for bench/run_all.py (see the module docstring); also prints the table."""
    result = run(rounds)
    show_table(result)
    return rows_from(result)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"measured rounds per host (default {ROUNDS})")
    parser.add_argument("--json", nargs="?", const="-", metavar="FILE",
                        help="print rows and raw samples as JSON (or write them to FILE)")
    args = parser.parse_args()
    result = run(args.rounds)
    if args.json is None:
        show_table(result)
    else:
        text = json.dumps({"rows": rows_from(result), "raw": result}, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
            show_table(result)
