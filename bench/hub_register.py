"""Register -> inbox usable on a joined host with 100 to 10,000 entities, against a host that never claims.

At each size (``--sizes``), the ``register`` op on joined host B's gateway socket, interleaved
with the same op on host C, which has every permission on the same broker and no ``hub.id``
(the baseline). Goal: <= 2x at every size. Also: B floods the registrar with claims
(``--claims``) against its rate limit while joined host D times its own single claims.
Method: docs/bench-methods.md.
Run: ``.venv/bin/python bench/hub_register.py [--sizes 100,1000,10000] [--samples N]
[--claims N] [--json [FILE]]``; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV_BIN = Path(sys.executable).parent
BRIDGE = str(VENV_BIN / "bridge")
NAME = Path(__file__).stem
SIZES, SAMPLES, CHECK_EVERY = (100, 1000, 10000), 20, 5
#: seconds between presence heartbeats in the bench homes: at the default 5 s, 10,000
#: entities per host would be 2,000 heartbeats a second per host, which would be measured instead
ROSTER_INTERVAL = "300"
CLAIMS, IDLE_PROBES, PROBE_GAP = 3000, 20, 0.05
BUDGET_MIN = 45.0  # growth stops (and the sizes reached are reported) after this many minutes
CALL_TIMEOUT = 60.0

if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))
if str(BENCH) not in sys.path:  # run_all loads the scripts by path
    sys.path.insert(0, str(BENCH))

from _common import Column, median, pct, print_table  # noqa: E402


def _processes_under(root: Path) -> list[int]:
    """Pids whose environment points into ``root`` (gateways, the node, the registrar); not
    epmd, which every Erlang node on the machine shares (bridge stops it once idle)."""
    mine = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if (
                str(root).encode() + b"/" in (proc / "environ").read_bytes()
                and b"epmd" not in (proc / "cmdline").read_bytes()
            ):
                mine.append(int(proc.name))
        except OSError:
            pass
    return mine


def _rss_mb(pid: int | None) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return float("nan")


class Home:
    """One simulated host: its own XDG dirs (as tests/support/env.py's make_home) and gateway."""

    def __init__(self, root: Path, name: str, host_id: str | None = None) -> None:
        self.name, self.root = name, root / name
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("BRIDGE_", "XDG_", "OCB_")) and k != "PYTHONDONTWRITEBYTECODE"
        }
        for part in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
            path = self.root / part.lower()
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.env[f"XDG_{part}_{'DIR' if part == 'RUNTIME' else 'HOME'}"] = str(path)
        if host_id:
            self.env["BRIDGE_HOST_ID"] = host_id
        self.env["BRIDGE_ROSTER_INTERVAL"] = ROSTER_INTERVAL
        self.proc: subprocess.Popen | None = None
        self.log_path = self.root / "gateway.log"

    @property
    def socket(self) -> Path:
        return Path(self.env["XDG_RUNTIME_DIR"]) / "bridge" / "gateway.sock"

    def data(self, *parts: str) -> Path:
        return Path(self.env["XDG_DATA_HOME"], "bridge", *parts)

    def broker_settings(self) -> tuple[str, str]:
        """(``broker.uri``, ``broker.tls_ca``) from this home's ``bridge.toml`` (``bridge
        config get`` redacts the password)."""
        raw = tomllib.loads(Path(self.env["XDG_CONFIG_HOME"], "bridge", "bridge.toml").read_text())
        broker = raw.get("broker", {})
        return broker["uri"], broker["tls_ca"]

    def bridge(self, *args: str, timeout: float = 180) -> str:
        proc = subprocess.run(
            [BRIDGE, *args],
            check=False,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{self.name}: bridge {' '.join(args[:2])} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}"
            )
        return proc.stdout

    def start_gateway(self, timeout: float = 60) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [BRIDGE, "gateway"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
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
                self.proc.wait(60)
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
    """Hub A; joined hosts B (gateway) and D (no gateway: it only claims); full-permission
    host C (gateway), all in ``homes`` as they start, so a failed set-up is still cleaned
    up. Returns the AMQP URI of A's own broker user (every permission), for the checks."""
    from bridgecli.hub.rabbitadmin import RabbitAdmin

    a, b, c, d = Home(root, "A", "hosta"), Home(root, "B"), Home(root, "C"), Home(root, "D")
    homes.update(A=a, B=b, C=c, D=d)
    a.bridge("hub", "start", "--listen", "127.0.0.1")
    b.bridge("join", a.bridge("hub", "invite", "hostb").strip())
    d.bridge("join", a.bridge("hub", "invite", "hostd").strip())
    b.start_gateway()
    status = json.loads(a.bridge("hub", "status", "--json"))
    # the hub home's administrator: RabbitAdmin without a user would read this process's home
    users = json.loads(a.data("broker", "credentials.json").read_text())
    admin = RabbitAdmin(
        int(status["broker"]["management_port"]), users.get("admin_user", "bridge.admin"), users["admin_password"]
    )
    password = os.urandom(18).hex()
    admin.put_user("hostc", password)
    admin.set_permissions("hostc", ".*", ".*", ".*")
    port = status["addresses"][0].rsplit(":", 1)[1]
    _, ca = b.broker_settings()
    for key, value in (
        ("broker.uri", f"amqps://hostc:{password}@127.0.0.1:{port}/"),
        ("broker.tls_ca", ca),
        ("host.id", "hostc"),
    ):
        c.bridge("config", "set", key, value)
    c.start_gateway()
    return json.loads(a.bridge("broker", "status", "--json"))["uri"]


# --- registrar claims: one host's burst against the rate limit, another host's wait ---------


def _connect(uri: str, ca: str | None = None) -> Any:
    """A blocking connection without heartbeats (the bench leaves it idle for minutes)."""
    import ssl

    import pika

    params = pika.URLParameters(uri)
    if ca:
        params.ssl_options = pika.SSLOptions(ssl.create_default_context(cafile=ca), params.host)
    params.heartbeat = 0
    params.blocked_connection_timeout = 60
    return pika.BlockingConnection(params)


class ClaimLink:
    """A host's own connection to ``bridge.registrar``, answers on direct reply-to (as
    :mod:`bridgecli.hub.claims` sends them), each answer stamped when it was read."""

    def __init__(self, uri: str, ca: str, host: str) -> None:
        from urllib.parse import unquote, urlsplit

        from bridgecli.hub import claims

        self.claims, self.host = claims, host
        self.user = unquote(urlsplit(uri).username or "")
        self.connection = _connect(uri, ca)
        self.channel = self.connection.channel()
        self.answers: dict[str, tuple[float, dict[str, Any]]] = {}
        self.channel.basic_consume(claims.REPLY_TO, self._on_answer, auto_ack=True)

    def _on_answer(self, channel: Any, method: Any, props: Any, body: bytes) -> None:
        self.answers[props.correlation_id] = (time.perf_counter(), json.loads(body))

    def publish(self, correlation: str) -> None:
        import pika

        from bridgecli import gids

        body = {"op": "claim", "entities": [{"gid": gids.mint(self.host), "label": f"c{correlation}"}]}
        self.channel.basic_publish(
            self.claims.EXCHANGE,
            self.claims.ROUTING_KEY,
            json.dumps(body).encode(),
            pika.BasicProperties(
                reply_to=self.claims.REPLY_TO,
                correlation_id=correlation,
                user_id=self.user,
                content_type="application/json",
            ),
        )

    def wait(self, correlations: set[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not correlations <= self.answers.keys() and time.monotonic() < deadline:
            self.connection.process_data_events(time_limit=0.05)

    def one(self, correlation: str, timeout: float = 30.0) -> tuple[float, str]:
        """One claim, waited for: (ms, the answer's kind or "ok"; "timeout" without one)."""
        t0 = time.perf_counter()
        self.publish(correlation)
        self.wait({correlation}, timeout)
        if correlation not in self.answers:
            return (time.perf_counter() - t0) * 1000, "timeout"
        at, answer = self.answers.pop(correlation)
        return (at - t0) * 1000, "ok" if answer.get("ok") else str(answer.get("kind"))

    def close(self) -> None:
        try:
            self.connection.close()
        except Exception:  # closing a broken connection: nothing left to report
            pass


def _probe(uri: str, ca: str, host: str, start: Any, stop: Any, out: Any) -> None:
    """Host D, in a process of its own (not to share a GIL with the burst): its claims one
    at a time, PROBE_GAP apart, first while the registrar is idle, then during the burst."""
    link = ClaimLink(uri, ca, host)
    idle = []
    for i in range(IDLE_PROBES):
        time.sleep(PROBE_GAP)
        idle.append(link.one(f"idle{i}"))
    out.send("idle done")
    busy = []
    if start.wait(120):
        while not stop.is_set() and len(busy) < 1000:
            busy.append(link.one(f"busy{len(busy)}"))
            time.sleep(PROBE_GAP)
    out.send({"idle": idle, "busy": busy})
    link.close()


def claims_burst(homes: dict[str, Home], count: int) -> dict[str, Any]:
    """B publishes ``count`` claims of its own tagged gids as fast as it can and reads every
    answer; D's single claims are timed meanwhile and, before, while idle."""
    from bridgecli.hub import limits

    uri_b, ca_b = homes["B"].broker_settings()
    uri_d, ca_d = homes["D"].broker_settings()
    ctx = multiprocessing.get_context("fork")
    start, stop = ctx.Event(), ctx.Event()
    ours, theirs = ctx.Pipe()
    prober = ctx.Process(target=_probe, args=(uri_d, ca_d, "hostd", start, stop, theirs), daemon=True)
    prober.start()  # before B's connection, which the fork would otherwise copy
    link = None
    try:
        link = ClaimLink(uri_b, ca_b, "hostb")
        if not ours.poll(120):
            raise RuntimeError("host D's idle claims did not finish within 120 s")
        ours.recv()
        start.set()
        sent: dict[str, float] = {}
        t0 = time.perf_counter()
        for i in range(count):
            sent[str(i)] = time.perf_counter()
            link.publish(str(i))
            if i % 100 == 99:
                link.connection.process_data_events(time_limit=0)
        published = time.perf_counter()
        link.wait(set(sent), 120)
        stop.set()
        if not ours.poll(60):
            raise RuntimeError("host D's claims did not end within 60 s of the burst")
        probes = ours.recv()
    finally:
        stop.set()
        if link is not None:
            link.close()
        prober.join(10)
        if prober.is_alive():
            prober.kill()
            prober.join(5)
    answers = [link.answers[c] for c in sent if c in link.answers]
    kinds: dict[str, int] = {}
    for _, answer in answers:
        kind = "ok" if answer.get("ok") else str(answer.get("kind"))
        kinds[kind] = kinds.get(kind, 0) + 1
    last = max((at for at, _ in answers), default=published)
    return {
        "count": count,
        "answered": len(answers),
        "kinds": kinds,
        "publish_s": published - t0,
        "span_s": last - t0,
        "ms": [(at - sent[c]) * 1000 for c, (at, _) in link.answers.items() if c in sent],
        "rate": limits.RATE,
        "burst": limits.BURST,
        "probes": probes,
    }


# --- register at scale -------------------------------------------------------------------


def _register(client: Any, label: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    answer = client.call("register", timeout=CALL_TIMEOUT, label=label, role="agent", deliver="hold")
    return (time.perf_counter() - t0) * 1000, answer["entity"]["gid"]


def measure_sizes(
    homes: dict[str, Home], operator_uri: str, sizes: list[int], samples: int, deadline: float, result: dict[str, Any]
) -> None:
    """Grow B and C together to each size (entities kept), then ``samples`` interleaved
    registers per host, every CHECK_EVERY-th followed by a consumer check; those are then
    unregistered. Each finished size is appended to ``result["sizes"]`` at once."""
    import pika

    from bridgecli.gateway.client import GatewayClient

    clients = {case: GatewayClient.require(homes[case].socket) for case in ("B", "C")}
    operator = _connect(operator_uri)
    channel = operator.channel()
    node_pid = json.loads(homes["A"].data("broker", "state.json").read_text()).get("pid")
    kept = 0
    try:
        for size in sizes:
            grow: dict[str, list[float]] = {"B": [], "C": []}
            began = time.monotonic()
            while kept < size:
                for case in ("B", "C") if kept % 2 == 0 else ("C", "B"):
                    grow[case].append(_register(clients[case], f"k{kept}")[0])
                kept += 1
                if time.monotonic() > deadline:
                    result["stopped"] = f"over the {result['budget_min']:g} min budget while growing to {size}"
                    return
            grown_s = time.monotonic() - began
            ms: dict[str, list[float]] = {"B": [], "C": []}
            checks = {"B": [0, 0], "C": [0, 0]}  # [1 consumer, checked]
            measured: dict[str, list[str]] = {"B": [], "C": []}
            for i in range(samples):
                for case in ("B", "C") if i % 2 == 0 else ("C", "B"):
                    took, gid = _register(clients[case], f"m{size}-{i}")
                    ms[case].append(took)
                    measured[case].append(gid)
                    if i % CHECK_EVERY == 0:
                        try:
                            consumers = channel.queue_declare(f"agent.{gid}.inbox", passive=True).method.consumer_count
                        except pika.exceptions.ChannelClosedByBroker:  # 404: no such inbox
                            consumers, channel = 0, operator.channel()
                        checks[case][0] += consumers == 1
                        checks[case][1] += 1
            for case, gids in measured.items():
                for gid in gids:
                    clients[case].call("unregister", timeout=CALL_TIMEOUT, target=gid)
            result["sizes"].append(
                {
                    "size": size,
                    "ms": ms,
                    "checks": checks,
                    "grow_s": grown_s,
                    "grow_ms_p50": {case: median(v) for case, v in grow.items()},
                    "rss_mb": {
                        "B": _rss_mb(homes["B"].proc and homes["B"].proc.pid),
                        "C": _rss_mb(homes["C"].proc and homes["C"].proc.pid),
                        "node": _rss_mb(node_pid),
                    },
                }
            )
            print(
                f"{NAME}: {size} entities per host done ({time.monotonic() - result['t0']:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    finally:
        for client in clients.values():
            client.close()
        try:
            operator.close()
        except Exception:  # the broker may be gone: cleanup follows
            pass


def run(
    sizes: list[int] | None = None, samples: int = SAMPLES, claims: int = CLAIMS, budget_min: float = BUDGET_MIN
) -> dict[str, Any]:
    """The samples: the claims burst first (B has no entities yet), then each size."""
    from bridgecli.hub import limits

    sizes = sorted(sizes or SIZES)
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="bhr", dir="/tmp"))  # short: socket paths have a limit
    homes: dict[str, Home] = {}
    result: dict[str, Any] = {
        "samples": samples,
        "sizes": [],
        "roster_interval": float(ROSTER_INTERVAL),
        "budget_min": budget_min,
        "t0": started,
    }
    try:
        operator_uri = setup(root, homes)
        result["setup_s"] = time.monotonic() - started
        if claims:
            result["claims"] = claims_burst(homes, claims)
            time.sleep(limits.BURST / limits.RATE + 1)  # B's bucket full again before it registers
        measure_sizes(homes, operator_uri, sizes, samples, started + budget_min * 60, result)
    finally:
        for home in homes.values():
            home.stop_gateway()
        if "A" in homes:
            try:
                homes["A"].bridge("hub", "stop", timeout=180)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:  # still remove the dirs
                print(f"{NAME}: bridge hub stop failed: {exc}", file=sys.stderr)
        left = _processes_under(root)
        if left:
            print(f"{NAME}: killing what still runs from {root}: pids {left}", file=sys.stderr)
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        shutil.rmtree(root, ignore_errors=True)
    result["total_s"] = time.monotonic() - started
    return result


def _stats(ms: list[float]) -> str:
    return f"p50 {pct(ms, 0.5):.2f} / p95 {pct(ms, 0.95):.2f} / p99 {pct(ms, 0.99):.2f} ms"


def rows_from(result: dict[str, Any]) -> list[dict[str, Any]]:
    """run_all rows: per size, the joined host's p50 against the full-permission host's; the
    registrar's answers to one host's claim burst and another host's wait meanwhile."""
    rows = []
    for entry in result["sizes"]:
        b, c = entry["ms"]["B"], entry["ms"]["C"]
        (ok_b, n_b), (ok_c, n_c) = entry["checks"]["B"], entry["checks"]["C"]
        value, base = pct(b, 0.5), pct(c, 0.5)
        ratio = value / base if base else None
        goal = "met" if ratio is not None and ratio <= 2 else "missed"
        rows.append(
            {
                "benchmark": NAME,
                "metric": f"register -> inbox usable, joined host with {entry['size']:,} entities, p50",
                "value": round(value, 2),
                "unit": "ms",
                "baseline": f"full-permission host, same size, p50 {base:.2f} ms",
                "ratio": round(ratio, 3) if ratio else None,
                "note": f"goal <=2x: {goal}; {len(b)} interleaved samples per host; joined {_stats(b)}, "
                f"baseline {_stats(c)}; 1 consumer in {ok_b}/{n_b} and {ok_c}/{n_c} checks; "
                f"grown to size by register ops (p50 {entry['grow_ms_p50']['B']:.1f} / "
                f"{entry['grow_ms_p50']['C']:.1f} ms); roster.interval {result['roster_interval']:g} s",
            }
        )
    if result.get("stopped"):
        rows.append(
            {
                "benchmark": NAME,
                "metric": "register at scale: stopped",
                "value": None,
                "unit": "",
                "baseline": "",
                "ratio": None,
                "note": result["stopped"],
            }
        )
    claims = result.get("claims")
    if claims:
        ok = claims["kinds"].get("ok", 0)
        allowed = claims["burst"] + claims["rate"] * claims["span_s"]
        others = ", ".join(f"{n} {k}" for k, n in sorted(claims["kinds"].items()) if k != "ok") or "none refused"
        rows.append(
            {
                "benchmark": NAME,
                "metric": f"registrar: claims accepted from one host sending {claims['count']:,} at once",
                "value": ok,
                "unit": "claims",
                "baseline": f"limit: burst {claims['burst']} + {claims['rate']:g}/s x {claims['span_s']:.2f} s "
                f"= {allowed:.0f}",
                "ratio": round(ok / allowed, 3),
                "note": f"{claims['answered']}/{claims['count']} answered ({others}) in {claims['span_s']:.2f} s: "
                f"{claims['answered'] / claims['span_s']:.0f} answers/s; published in "
                f"{claims['publish_s']:.2f} s; each answered within {_stats(claims['ms'])}",
            }
        )
        idle = [ms for ms, _ in claims["probes"]["idle"]]
        busy = [ms for ms, _ in claims["probes"]["busy"]]
        if idle and busy:
            kinds = sorted({k for _, k in claims["probes"]["idle"] + claims["probes"]["busy"]})
            rows.append(
                {
                    "benchmark": NAME,
                    "metric": "registrar: another joined host's claim answered during that burst, p50",
                    "value": round(pct(busy, 0.5), 2),
                    "unit": "ms",
                    "baseline": f"same claim, registrar idle, p50 {pct(idle, 0.5):.2f} ms",
                    "ratio": round(pct(busy, 0.5) / pct(idle, 0.5), 3),
                    "note": f"{len(busy)} claims {PROBE_GAP * 1000:.0f} ms apart during the burst, max "
                    f"{max(busy):.1f} ms; {len(idle)} idle, max {max(idle):.1f} ms; answers: {', '.join(kinds)}",
                }
            )
    return rows


SIZE_TABLE = (
    Column("entities", 8, lambda r: f"{r['size']:,}", ">"),
    Column("B p50", 7, lambda r: f"{pct(r['ms']['B'], 0.5):.1f}", ">"),
    Column("C p50", 7, lambda r: f"{pct(r['ms']['C'], 0.5):.1f}", ">"),
    Column("B/C", 6, lambda r: f"{pct(r['ms']['B'], 0.5) / pct(r['ms']['C'], 0.5):.2f}x", ">"),
    Column("B p95", 7, lambda r: f"{pct(r['ms']['B'], 0.95):.1f}", ">"),
    Column("C p95", 7, lambda r: f"{pct(r['ms']['C'], 0.95):.1f}", ">"),
    Column("B p99", 7, lambda r: f"{pct(r['ms']['B'], 0.99):.1f}", ">"),
    Column("C p99", 7, lambda r: f"{pct(r['ms']['C'], 0.99):.1f}", ">"),
    Column("usable", 9, lambda r: "{}/{} {}/{}".format(*r["checks"]["B"], *r["checks"]["C"]), ">"),
    Column("grow p50 B/C", 13, lambda r: "{B:.1f}/{C:.1f}".format(**r["grow_ms_p50"]), ">"),
    Column("RSS MB B/C/node", 16, lambda r: "{B:.0f}/{C:.0f}/{node:.0f}".format(**r["rss_mb"]), ">"),
)


def show_table(result: dict[str, Any]) -> None:
    print_table(result["sizes"], SIZE_TABLE)
    print(
        f"ms per register op; B joined (tagged gids, no claim), C full permissions; {result['samples']} "
        f"interleaved samples per host and size; usable = inbox had 1 consumer (B, C checks)"
    )
    if result.get("stopped"):
        print(f"stopped: {result['stopped']}")
    claims = result.get("claims")
    if claims:
        print(
            f"claims burst of {claims['count']} from host B: {claims['answered']} answered "
            f"{claims['kinds']} in {claims['span_s']:.2f} s ({claims['answered'] / claims['span_s']:.0f}/s); "
            f"limit {claims['rate']:g}/s + burst {claims['burst']}"
        )
        for phase in ("idle", "busy"):
            ms = [m for m, _ in claims["probes"][phase]]
            if ms:
                print(f"host D's claim, {phase}: {_stats(ms)}, max {max(ms):.1f} ms, n={len(ms)}")
    print(f"set-up {result.get('setup_s', 0):.0f} s, whole run {result['total_s']:.0f} s")


def main(sizes: list[int] | None = None) -> list[dict[str, Any]]:
    """Rows for bench/run_all.py (see the module docstring); also prints the table."""
    result = run(sizes)
    show_table(result)
    return rows_from(result)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="entities kept per host, comma-separated (default %(default)s)",
    )
    parser.add_argument(
        "--samples", type=int, default=SAMPLES, help=f"measured registers per host and size (default {SAMPLES})"
    )
    parser.add_argument(
        "--claims", type=int, default=CLAIMS, help=f"claims in host B's burst (default {CLAIMS}; 0: no claims part)"
    )
    parser.add_argument(
        "--budget-min",
        type=float,
        default=BUDGET_MIN,
        help=f"stop growing after this many minutes (default {BUDGET_MIN:g})",
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="FILE",
        help="print rows and raw samples as JSON (or write them to FILE)",
    )
    args = parser.parse_args()
    result = run([int(s) for s in args.sizes.split(",") if s.strip()], args.samples, args.claims, args.budget_min)
    if args.json is None:
        show_table(result)
    else:
        text = json.dumps({"rows": rows_from(result), "raw": result}, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
            show_table(result)
